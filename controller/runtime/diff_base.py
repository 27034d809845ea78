"""Kopf's diff base, built without copying the status stanza first.

On every watch event Kopf builds the object's *essence* (what change-detecting handlers
diff) by deep-copying the whole body and then dropping ``status``. A StragglerReport's
status is its report, 55 kB of JSON for a 256-rank job, so each report (and each echo of
our own display write) was deep-copied once for nothing: the essence leaves status out,
and this operator has no change-detecting handlers. Profiled against the real
kube-apiserver (docs/performance.md, issue 16), that copy was about a fifth of the
controller's CPU. The essence built here is Kopf's own, field for field; only a body
whose status Kopf is asked to keep (a handler's ``field`` inside status) takes Kopf's
path unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast


def _in_status(field: Any) -> bool:
    parts = field.split(".") if isinstance(field, str) else list(field)
    return bool(parts) and parts[0] == "status"


def status_free_diff_base() -> Any:
    """A ``kopf.AnnotationsDiffBaseStorage`` (Kopf's default) that copies no status."""
    import kopf

    class StatusFreeDiffBase(kopf.AnnotationsDiffBaseStorage):
        def build(self, *, body: Any, extra_fields: Iterable[Any] | None = None) -> Any:
            fields = list(extra_fields or ())
            if "status" not in body or any(_in_status(f) for f in fields):
                return super().build(body=body, extra_fields=fields)
            slim = kopf.Body(cast(kopf.RawBody, {k: v for k, v in body.items() if k != "status"}))
            return super().build(body=slim, extra_fields=fields)

    return StatusFreeDiffBase()
