"""The API stand-in: kmock's `KubernetesEmulator` with the gaps our code meets closed.

kmock brings the HTTP server plumbing, discovery (`/api`, `/apis/...`), the object
store with per-object history (`server.objects[...]`) and the raw request list. This
class replaces its request handling for resource URLs with the semantics a real API
server has and our code relies on: 201 on create, resourceVersion on every write and
409 on stale ones, PUT, merge and JSON patches, status subresources, label and field
selectors, watches that resume from a resourceVersion, the pod eviction subresource
with PodDisruptionBudgets, namespaces as a resource, fault injection and a request log
with the status of every answer. Everything here runs on the server's event loop;
`running.py` offers thread-safe entry points for tests.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import json
import logging
import secrets
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp.web
import attrs
from kmock import KubernetesEmulator, KubernetesError, ResourceInfo, resource
from kmock._internal import apps, enums, parsing, rendering

from .builtin_resources import BUILTINS, VERBS
from .disruption import PHASES_IGNORING_BUDGETS, Budget, evaluate, selects
from .faults import FaultBook, RequestShape
from .history import History, RequestRecord
from .patches import PatchError, json_patch, merge_patch
from .paths import parse_api_path
from .selectors import SelectorError, parse_field_selector, parse_label_selector

logger = logging.getLogger(__name__)

ObjectKey = tuple[resource, str | None, str]
Body = dict[str, Any]

PODS = resource(group="", version="v1", plural="pods")
PDBS = resource(group="policy", version="v1", plural="poddisruptionbudgets")
CRDS = resource(group="apiextensions.k8s.io", version="v1", plural="customresourcedefinitions")

_REASONS = {
    400: "BadRequest",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
_MERGE_TYPES = frozenset(
    {
        "",
        "application/json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
    }
)


@dataclass(frozen=True, slots=True)
class ApiError(Exception):
    """Answered as a `Status` object with this code."""

    code: int
    message: str
    reason: str | None = None
    details: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class _LogEntry:
    rv: int
    key: ObjectKey
    type: str
    object: Body


def _timestamp(now: datetime.datetime) -> str:
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _group_version(res: resource) -> str:
    return f"{res.group}/{res.version}" if res.group else str(res.version)


def _verb(method: str, name: str | None, query: Mapping[str, str]) -> str | None:
    if method == "GET":
        if query.get("watch") in {"true", "1"}:
            return "watch"
        return "get" if name else "list"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if name else "deletecollection"
    return None


def _spec_part(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in obj.items() if key not in {"metadata", "status"}}


@attrs.define(kw_only=True)
class ApiServer(KubernetesEmulator):
    faults: FaultBook = attrs.field(factory=FaultBook)
    history: History = attrs.field(factory=History)
    kubernetes_version: tuple[int, int] = (1, 33)
    event_log_size: int = 10_000
    clock: Callable[[], datetime.datetime] = _utcnow

    # Real servers never answer resourceVersion "0": it means "any" in list and watch.
    _rv: int = attrs.field(default=100, init=False)
    _log: list[_LogEntry] = attrs.field(factory=list, init=False)
    _log_base: int = attrs.field(default=0, init=False)  # entries trimmed from the front
    _gone_below_rv: int = attrs.field(default=0, init=False)
    _wakeups: set[asyncio.Event] = attrs.field(factory=set, init=False)
    _closing: bool = attrs.field(default=False, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        # kmock serves `/version` only; clients ask for `/version/` as well.
        self.fallback["get /version/"] << self._serve_server_version
        for builtin in BUILTINS:
            self.resources[f"{builtin.group_version}/{builtin.plural}"] = ResourceInfo(
                namespaced=builtin.namespaced,
                kind=builtin.kind,
                singular=builtin.kind.lower(),
                verbs=set(VERBS),
                shortnames=set(builtin.shortnames),
                subresources=set(builtin.subresources),
            )

    # ---- HTTP entry -----------------------------------------------------------------

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        try:
            request = await self._parse(raw_request)
            self._requests.append(request)
            return await self._handle(request)
        except Exception as exc:
            logger.exception("harness failed to serve a request")
            if self._errors:
                self._errors[-1].append(exc)
            return await self._render_error(exc)

    async def _parse(self, raw: aiohttp.web.BaseRequest) -> rendering.Request:
        body = await raw.read()
        try:
            data = json.loads(body) if body else None
        except ValueError:
            data = None
        query = dict(raw.query)
        api = parse_api_path(raw.path)
        method = enums.method(raw.method)
        fields: dict[str, Any] = {}
        if api is not None:
            parsed = parsing.ParsedPath(
                api.group, api.version, api.plural, api.namespace, api.name, api.subresource
            )
            fields = {
                "action": parsing.guess_k8s(parsed, method, query),
                "resource": resource(group=api.group, version=api.version, plural=api.plural),
                "namespace": api.namespace,
                "name": api.name,
                "subresource": api.subresource,
            }
        return rendering.Request(
            id=len(self._requests),
            raw_request=raw,
            url=raw.url,
            method=raw.method,
            params=query,
            headers=dict(raw.headers),
            cookies=dict(raw.cookies),
            data=data,
            body=body,
            text=body.decode(errors="replace"),
            **fields,
        )

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        res = request.resource
        method = str(request.method.value).upper()
        path = request.url.path
        verb = _verb(method, request.name, request.params) if res is not None else None
        plural = res.plural if res is not None else None
        record = RequestRecord(
            id=request.id,
            method=method,
            path=path,
            query=dict(request.params),
            verb=verb,
            group=res.group if res is not None else None,
            version=res.version if res is not None else None,
            plural=plural,
            namespace=request.namespace,
            name=request.name,
            subresource=request.subresource,
            body=copy.deepcopy(request.data),
            content_type=request.headers.get("Content-Type"),
        )
        self.history.append(record)
        shape = RequestShape(method, verb, path, plural, request.subresource)
        fault = self.faults.take(shape)
        response: aiohttp.web.StreamResponse
        if fault is not None:
            record.fault = True
            if fault.before is not None:
                fault.before(self)
            if fault.status is not None:
                # Refused before anything happens, after the delay (a slow failure).
                record.status = fault.status
                await asyncio.sleep(fault.delay_s)
                error = ApiError(fault.status, fault.message, fault.reason)
                return self._status_response(error, fault.retry_after_s)
        try:
            if res is not None and res.plural is not None:
                response = await self._serve_resource(request, record)
            else:
                response = await apps.RawHandler._handle(self, request)
        except ApiError as exc:
            response = self._status_response(exc)
        except KubernetesError as exc:
            response = await self._render_error(exc)
        record.status = response.status
        if fault is not None and fault.delay_s:
            # Served, then answered late: a client that times out has still written.
            await asyncio.sleep(fault.delay_s)
        return response

    def _status_response(
        self, exc: ApiError, retry_after_s: int | None = None
    ) -> aiohttp.web.Response:
        headers = {"Retry-After": str(retry_after_s)} if retry_after_s is not None else None
        return aiohttp.web.json_response(
            {
                "apiVersion": "v1",
                "kind": "Status",
                "metadata": {},
                "status": "Failure",
                "code": exc.code,
                "reason": exc.reason or _REASONS.get(exc.code, "Unknown"),
                "message": exc.message,
                "details": dict(exc.details or {}),
            },
            status=exc.code,
            headers=headers,
        )

    async def _serve_server_version(self, request: rendering.Request) -> rendering.Payload:
        major, minor = self.kubernetes_version
        return {
            "major": str(major),
            "minor": str(minor),
            "gitVersion": f"v{major}.{minor}.0",
            "gitCommit": "0" * 40,
            "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "go1.24.0",
            "compiler": "gc",
            "platform": "linux/amd64",
        }

    # ---- dispatch -----------------------------------------------------------------

    def _info(self, res: resource) -> ResourceInfo:
        if res in self.resources:
            return self.resources[res]
        raise ApiError(404, "the server could not find the requested resource", "NotFound")

    async def _serve_resource(
        self, request: rendering.Request, record: RequestRecord
    ) -> aiohttp.web.StreamResponse:
        res = request.resource
        assert res is not None
        info = self._info(res)
        if not info.namespaced and request.namespace is not None:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        namespace = request.namespace if info.namespaced else None
        name, sub = request.name, request.subresource
        if sub is not None and sub not in info.subresources:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        method = record.method
        data = request.data
        if method == "GET" and record.verb == "watch":
            return await self._watch(request, res, namespace)
        if method == "GET" and name is None:
            return aiohttp.web.json_response(self._list(res, info, namespace, request.params))
        if method == "GET":
            return aiohttp.web.json_response(self._require((res, namespace, name)))
        if method == "POST" and name is None:
            return aiohttp.web.json_response(self._create(res, info, namespace, data), status=201)
        if method == "POST" and sub == "eviction" and res == PODS:
            return aiohttp.web.json_response(self._evict(namespace, name, data), status=201)
        if method == "PUT" and name is not None:
            key: ObjectKey = (res, namespace, name)
            return aiohttp.web.json_response(self._replace(key, info, sub, data))
        if method == "PATCH" and name is not None:
            content_type = (record.content_type or "").split(";")[0].strip()
            return aiohttp.web.json_response(
                self._patch((res, namespace, name), info, sub, content_type, data)
            )
        if method == "DELETE" and name is not None:
            options = dict(data) if isinstance(data, dict) else {}
            if "gracePeriodSeconds" in request.params:  # the query form of DeleteOptions
                options["gracePeriodSeconds"] = int(request.params["gracePeriodSeconds"])
            return aiohttp.web.json_response(self._delete((res, namespace, name), options))
        if method == "DELETE":
            return aiohttp.web.json_response(
                self._delete_collection(res, info, namespace, request.params)
            )
        raise ApiError(405, f"{method} is not supported on this URL", "MethodNotAllowed")

    # ---- store --------------------------------------------------------------------

    def _current(self, key: ObjectKey) -> Body | None:
        if key in self._objects and not self._objects[key].deleted:
            return copy.deepcopy(self._objects[key].raw)
        return None

    def _require(self, key: ObjectKey) -> Body:
        current = self._current(key)
        if current is None:
            res, _, name = key
            raise ApiError(
                404,
                f'{res.plural} "{name}" not found',
                "NotFound",
                {"name": name, "kind": res.plural},
            )
        return current

    def _record_event(self, key: ObjectKey, event_type: str, obj: Body) -> None:
        self._log.append(_LogEntry(self._rv, key, event_type, copy.deepcopy(obj)))
        overflow = len(self._log) - self.event_log_size
        if overflow > 0:
            self._gone_below_rv = self._log[overflow - 1].rv
            del self._log[:overflow]
            self._log_base += overflow
        for wakeup in self._wakeups:
            wakeup.set()

    def _store(self, key: ObjectKey, obj: Body, event_type: str) -> Body:
        self._rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._rv)
        if key in self._objects:
            self._objects[key].create(copy.deepcopy(obj))
        else:
            self._objects[key] = copy.deepcopy(obj)
        self._record_event(key, event_type, obj)
        return obj

    def _remove(self, key: ObjectKey, last: Body) -> Body:
        self._rv += 1
        last.setdefault("metadata", {})["resourceVersion"] = str(self._rv)
        self._objects[key].delete()
        self._record_event(key, "DELETED", last)
        return last

    def _conflict(self, res: resource, name: str) -> ApiError:
        qualified = f"{res.plural}.{res.group}" if res.group else str(res.plural)
        return ApiError(
            409,
            f'Operation cannot be fulfilled on {qualified} "{name}": the object has been '
            "modified; please apply your changes to the latest version and try again",
            "Conflict",
            {"name": name, "kind": res.plural},
        )

    # ---- verbs ---------------------------------------------------------------------

    def _matcher(
        self, params: Mapping[str, str], namespace: str | None, name: str | None
    ) -> Callable[[ObjectKey, Body], bool]:
        try:
            labels = parse_label_selector(params.get("labelSelector"))
            fields = parse_field_selector(params.get("fieldSelector"))
        except SelectorError as exc:
            raise ApiError(400, str(exc), "BadRequest") from exc

        def matches(key: ObjectKey, obj: Body) -> bool:
            _, obj_namespace, obj_name = key
            return (
                (namespace is None or obj_namespace == namespace)
                and (name is None or obj_name == name)
                and labels(obj.get("metadata", {}).get("labels") or {})
                and fields(obj)
            )

        return matches

    def _objects_of(self, res: resource, namespace: str | None) -> list[tuple[ObjectKey, Body]]:
        found = [
            (key, copy.deepcopy(obj.raw))
            for key, obj in self._objects.items()
            if key[0] == res and not obj.deleted and (namespace is None or key[1] == namespace)
        ]
        return sorted(found, key=lambda item: (item[0][1] or "", item[0][2]))

    def _list(
        self, res: resource, info: ResourceInfo, namespace: str | None, params: Mapping[str, str]
    ) -> Body:
        matches = self._matcher(params, namespace, None)
        return {
            "apiVersion": _group_version(res),
            "kind": f"{info.kind}List",
            "metadata": {"resourceVersion": str(self._rv)},
            "items": [obj for key, obj in self._objects_of(res, namespace) if matches(key, obj)],
        }

    def _create(self, res: resource, info: ResourceInfo, namespace: str | None, data: Any) -> Body:
        if not isinstance(data, dict):
            raise ApiError(400, "the request body must be a JSON object", "BadRequest")
        obj = copy.deepcopy(data)
        meta = obj.setdefault("metadata", {})
        if info.namespaced:
            if namespace is None:
                raise ApiError(404, "namespaced resources are created inside a namespace")
            if meta.get("namespace") not in {None, namespace}:
                raise ApiError(
                    400,
                    "the namespace of the provided object does not match the namespace "
                    "sent on the request",
                    "BadRequest",
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        name = meta.get("name")
        if not name:
            raise ApiError(
                422,
                f'{info.kind} "" is invalid: metadata.name: Required value: '
                "name or generateName is required",
                "Invalid",
            )
        key: ObjectKey = (res, namespace, name)
        if self._current(key) is not None:
            raise ApiError(
                409,
                f'{res.plural} "{name}" already exists',
                "AlreadyExists",
                {"name": name, "kind": res.plural},
            )
        for field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _timestamp(self.clock())
        meta["generation"] = 1
        obj.setdefault("apiVersion", _group_version(res))
        obj.setdefault("kind", info.kind)
        stored = self._store(key, obj, "ADDED")
        if res == CRDS:
            self.register_crd(stored)
        return stored

    def _commit(
        self, key: ObjectKey, info: ResourceInfo, current: Body, new: Body, sub: str | None
    ) -> Body:
        if sub == "status":
            merged = copy.deepcopy(current)
            if new.get("status") is None:
                merged.pop("status", None)
            else:
                merged["status"] = new["status"]
        else:
            merged = new
            if "status" in info.subresources:
                # With a status subresource the main endpoint cannot change status.
                if "status" in current:
                    merged["status"] = current["status"]
                else:
                    merged.pop("status", None)
        meta = merged.setdefault("metadata", {})
        old_meta = current["metadata"]
        for field in (
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "resourceVersion",
        ):
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        merged["apiVersion"] = current.get("apiVersion")
        merged["kind"] = current.get("kind")
        if merged == current:
            return current  # a no-op write keeps the resourceVersion, as the real server
        if _spec_part(merged) != _spec_part(current):
            meta["generation"] = int(old_meta.get("generation", 1)) + 1
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._remove(key, merged)
        return self._store(key, merged, "MODIFIED")

    def _replace(self, key: ObjectKey, info: ResourceInfo, sub: str | None, data: Any) -> Body:
        res, _, name = key
        current = self._require(key)
        if not isinstance(data, dict):
            raise ApiError(400, "the request body must be a JSON object", "BadRequest")
        body_name = data.get("metadata", {}).get("name")
        if body_name not in {None, name}:
            raise ApiError(400, "the name of the object does not match the URL", "BadRequest")
        sent_rv = data.get("metadata", {}).get("resourceVersion")
        if sent_rv and sent_rv != current["metadata"]["resourceVersion"]:
            raise self._conflict(res, name)
        return self._commit(key, info, current, copy.deepcopy(data), sub)

    def _patch(
        self, key: ObjectKey, info: ResourceInfo, sub: str | None, content_type: str, data: Any
    ) -> Body:
        res, _, name = key
        current = self._require(key)
        current_rv = current["metadata"]["resourceVersion"]
        if content_type == "application/json-patch+json":
            try:
                new = json_patch(current, data)
            except PatchError as exc:
                raise ApiError(422, str(exc), "Invalid") from exc
        elif content_type in _MERGE_TYPES:
            if not isinstance(data, dict):
                raise ApiError(400, "a merge patch must be a JSON object", "BadRequest")
            new = merge_patch(current, data)
        else:
            raise ApiError(415, f"unsupported patch type: {content_type!r}", "UnsupportedMediaType")
        # A patch that names a resourceVersion is a precondition, as in the real server.
        patched_rv = new.get("metadata", {}).get("resourceVersion")
        if patched_rv not in {None, "", current_rv}:
            raise self._conflict(res, name)
        return self._commit(key, info, current, new, sub)

    def _check_preconditions(self, key: ObjectKey, current: Body, options: Any) -> None:
        preconditions = (options or {}).get("preconditions") or {}
        meta = current["metadata"]
        uid_ok = preconditions.get("uid") in {None, meta.get("uid")}
        rv_ok = preconditions.get("resourceVersion") in {None, meta.get("resourceVersion")}
        if not (uid_ok and rv_ok):
            raise self._conflict(key[0], key[2])

    def _delete(self, key: ObjectKey, options: Any) -> Body:
        current = self._require(key)
        self._check_preconditions(key, current, options)
        meta = current["metadata"]
        grace = self._pod_grace_s(key, current, options)
        if grace is not None:
            # A pod bound to a node is only marked: its kubelet stops the containers and
            # deletes it with grace 0. There is no kubelet here, so it stays Terminating
            # until someone deletes it with grace 0 (``RunningServer.finish_termination``).
            if grace > 0:
                if meta.get("deletionTimestamp"):
                    return current
                when = self.clock() + datetime.timedelta(seconds=grace)
                meta["deletionTimestamp"] = _timestamp(when)
                meta["deletionGracePeriodSeconds"] = grace
                return self._store(key, current, "MODIFIED")
            if not meta.get("finalizers"):
                return self._remove(key, current)
        if meta.get("deletionTimestamp"):
            return current
        if meta.get("finalizers"):
            meta["deletionTimestamp"] = _timestamp(self.clock())
            meta["deletionGracePeriodSeconds"] = 0
            return self._store(key, current, "MODIFIED")
        return self._remove(key, current)

    @staticmethod
    def _pod_grace_s(key: ObjectKey, pod: Body, options: Any) -> int | None:
        """The grace period of a bound pod's deletion, as the API server picks it (the
        request's, else the pod's ``terminationGracePeriodSeconds``, else 30 s); None
        for anything that is not a pod bound to a node (deleted at once)."""
        if key[0] != PODS or not (pod.get("spec") or {}).get("nodeName"):
            return None
        asked = (options or {}).get("gracePeriodSeconds") if isinstance(options, dict) else None
        if asked is None:
            asked = (pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        return max(0, int(asked))

    def _delete_collection(
        self, res: resource, info: ResourceInfo, namespace: str | None, params: Mapping[str, str]
    ) -> Body:
        matches = self._matcher(params, namespace, None)
        deleted = [
            self._delete(key, None)
            for key, obj in self._objects_of(res, namespace)
            if matches(key, obj)
        ]
        return {
            "apiVersion": _group_version(res),
            "kind": f"{info.kind}List",
            "metadata": {"resourceVersion": str(self._rv)},
            "items": deleted,
        }

    def _evict(self, namespace: str | None, name: str | None, data: Any) -> Body:
        assert name is not None
        key: ObjectKey = (PODS, namespace, name)
        pod = self._require(key)
        options = (data or {}).get("deleteOptions") if isinstance(data, dict) else None
        self._check_preconditions(key, pod, options)
        phase = (pod.get("status") or {}).get("phase")
        if not pod["metadata"].get("deletionTimestamp") and phase not in PHASES_IGNORING_BUDGETS:
            pdbs = [pdb for _, pdb in self._objects_of(PDBS, namespace) if selects(pdb, pod)]
            if len(pdbs) > 1:
                raise ApiError(
                    500,
                    "This pod has more than one PodDisruptionBudget, which the eviction "
                    "subresource does not support.",
                    "InternalError",
                )
            if pdbs:
                pods = [obj for _, obj in self._objects_of(PODS, namespace)]
                budget = evaluate(pdbs[0], pods)
                self._record_budget(pdbs[0], budget)
                if budget.disruptions_allowed < 1:
                    raise ApiError(
                        429,
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                        "TooManyRequests",
                        {
                            "causes": [
                                {
                                    "reason": "DisruptionBudget",
                                    "message": (
                                        f"The disruption budget {budget.name} needs "
                                        f"{budget.desired_healthy} healthy pods and has "
                                        f"{budget.healthy} currently"
                                    ),
                                }
                            ]
                        },
                    )
        self._delete(key, options)
        return {
            "apiVersion": "v1",
            "kind": "Status",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }

    def _record_budget(self, pdb: Body, budget: Budget) -> None:
        """Write the budget into the PDB's status, as the disruption controller would.

        `expectedPods` there is also the high-water mark `evaluate` reads back: the
        harness has no workload controllers, so the pods a budget expects are the most
        it has seen, and an evicted pod that nobody replaced stays missing.
        """
        key: ObjectKey = (PDBS, pdb["metadata"].get("namespace"), pdb["metadata"]["name"])
        allowed_after = budget.disruptions_allowed - (1 if budget.disruptions_allowed else 0)
        status = {
            "expectedPods": budget.expected,
            "currentHealthy": budget.healthy - (1 if budget.disruptions_allowed else 0),
            "desiredHealthy": budget.desired_healthy,
            "disruptionsAllowed": allowed_after,
        }
        self._commit(key, self.resources[PDBS], pdb, {**pdb, "status": status}, "status")

    async def _watch(
        self, request: rendering.Request, res: resource, namespace: str | None
    ) -> aiohttp.web.StreamResponse:
        matches = self._matcher(request.params, namespace, request.name)
        since = request.params.get("resourceVersion") or "0"
        timeout = request.params.get("timeoutSeconds")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(timeout) if timeout else None
        raw = request._raw_request
        assert raw is not None
        response = aiohttp.web.StreamResponse(status=200)
        response.content_type = "application/json"
        await response.prepare(raw)

        pending: list[Body] = []
        if since == "0":
            position = self._log_base + len(self._log)
            pending = [
                {"type": "ADDED", "object": obj}
                for key, obj in self._objects_of(res, namespace)
                if matches(key, obj)
            ]
        elif not since.isdigit() or int(since) < self._gone_below_rv:
            pending = [{"type": "ERROR", "object": self._expired_status(since)}]
            position = -1
        else:
            position = self._log_base + sum(1 for entry in self._log if entry.rv <= int(since))

        wakeup = asyncio.Event()
        self._wakeups.add(wakeup)
        try:
            while True:
                wakeup.clear()
                if position >= 0:
                    while position < self._log_base + len(self._log):
                        entry = self._log[position - self._log_base]
                        position += 1
                        if entry.key[0] == res and matches(entry.key, entry.object):
                            pending.append({"type": entry.type, "object": entry.object})
                for event in pending:
                    await response.write(json.dumps(event).encode() + b"\n")
                pending = []
                if self._closing or position < 0:
                    break
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    break
                try:
                    await asyncio.wait_for(wakeup.wait(), remaining)
                except TimeoutError:
                    break
        except ConnectionResetError:
            pass  # the client went away; nothing to clean up but the wakeup
        finally:
            self._wakeups.discard(wakeup)
        return response

    def _expired_status(self, since: str) -> Body:
        return {
            "apiVersion": "v1",
            "kind": "Status",
            "metadata": {},
            "status": "Failure",
            "code": 410,
            "reason": "Expired",
            "message": f"too old resource version: {since} ({self._gone_below_rv})",
        }

    # ---- test-side helpers (call on the loop; running.py marshals) ------------------

    def register_crd(self, crd: Mapping[str, Any]) -> None:
        """Serve the custom resource a CRD defines (called on every CRD create)."""
        spec = crd["spec"]
        names = spec["names"]
        for version in spec.get("versions", []):
            if not version.get("served", True):
                continue
            self.resources[f"{spec['group']}/{version['name']}/{names['plural']}"] = ResourceInfo(
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                kind=names["kind"],
                singular=names.get("singular") or names["kind"].lower(),
                verbs=set(VERBS),
                shortnames=set(names.get("shortNames") or []),
                categories=set(names.get("categories") or []),
                subresources=set((version.get("subresources") or {}).keys()),
            )

    def resource_for(self, api_version: str, kind: str) -> tuple[resource, ResourceInfo]:
        group, _, version = api_version.rpartition("/")
        for res in self.resources:
            info = self.resources[res]
            if res.group == group and res.version == version and info.kind == kind:
                return res, info
        raise LookupError(f"the harness serves no {kind} in {api_version}; apply its CRD first")

    def apply(self, obj: Mapping[str, Any]) -> Body:
        """Create, or replace whole (status included), as test setup; emits watch events."""
        res, info = self.resource_for(obj["apiVersion"], obj["kind"])
        namespace = obj.get("metadata", {}).get("namespace") if info.namespaced else None
        if info.namespaced and namespace is None:
            namespace = "default"
        key: ObjectKey = (res, namespace, obj["metadata"]["name"])
        current = self._current(key)
        if current is None:
            status = copy.deepcopy(obj.get("status"))
            created = self._create(res, info, namespace, dict(obj))
            if status is None or created.get("status") == status:
                return created
            current, obj = created, {**created, "status": status}
        new = copy.deepcopy(dict(obj))
        new.setdefault("metadata", {}).pop("resourceVersion", None)
        # Status is part of the seed: commit as a status write, then the rest.
        with_status = self._commit(key, info, current, copy.deepcopy(new), "status")
        return self._commit(key, info, with_status, new, None)

    def read(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Body | None:
        res, info = self.resource_for(api_version, kind)
        return self._current((res, namespace if info.namespaced else None, name))

    def delete_object(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Body:
        """Delete as a controller would (finalizers honoured); 404 raises ApiError."""
        res, info = self.resource_for(api_version, kind)
        return self._delete((res, namespace if info.namespaced else None, name), None)

    def list_objects(self, api_version: str, kind: str, namespace: str | None = None) -> list[Body]:
        res, _ = self.resource_for(api_version, kind)
        return [obj for _, obj in self._objects_of(res, namespace)]

    def close_watches(self) -> None:
        self._closing = True
        for wakeup in self._wakeups:
            wakeup.set()
