"""Kubernetes URL paths to (group, version, plural, namespace, name, subresource).

kmock's own parser fails on `/api/v1/namespaces` (it takes `namespaces` for the
namespace prefix and finds nothing after it), so the harness parses paths itself.
"""

from __future__ import annotations

from dataclasses import dataclass

# Subresources of a namespace whose path would otherwise read as a resource list
# inside that namespace (`/api/v1/namespaces/ns/status`).
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass(frozen=True, slots=True)
class ApiPath:
    group: str
    version: str
    plural: str | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None


def parse_api_path(path: str) -> ApiPath | None:
    """Split a resource URL; `None` for anything outside `/api/v1` and `/apis/g/v`."""
    parts = [part for part in path.strip("/").split("/") if part]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace: str | None = None
    if rest and rest[0] == "namespaces":
        in_namespace = len(rest) >= 3 and not (
            len(rest) == 3 and rest[2] in _NAMESPACE_SUBRESOURCES
        )
        if in_namespace:
            namespace, rest = rest[1], rest[2:]
    if not rest:
        return ApiPath(group, version)
    return ApiPath(
        group=group,
        version=version,
        plural=rest[0],
        namespace=namespace,
        name=rest[1] if len(rest) > 1 else None,
        subresource="/".join(rest[2:]) or None,
    )
