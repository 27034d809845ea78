"""What the operator spends beside its decisions: Kopf's diff base (its essence exactly, without
deep-copying status), the collector (the long-lived heap frozen once the cache settled), and
the watch streams' JSON decoder (pydantic-core's, the standard library's answers)."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import kopf
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pacekeeper.controller.runtime import watch_json
from pacekeeper.controller.runtime.diff_base import status_free_diff_base


class Uncopyable:
    """A value whose deep copy fails the test: status must not be copied at all."""

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        raise AssertionError("status was deep-copied")


def report_body(annotations: dict[str, str], status: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "pacekeeper.dev/v1alpha1",
        "kind": "StragglerReport",
        "metadata": {
            "name": "llama",
            "namespace": "team-a",
            "uid": "u-1",
            "resourceVersion": "42",
            "labels": {"app": "train"},
            "annotations": annotations,
            "managedFields": [{"manager": "reporter"}],
        },
        "spec": {"control": {"probe": {"id": "p-1"}}},
        "status": status,
    }


_text = st.text("abcxyz./-", min_size=1, max_size=12)
_annotations = st.dictionaries(
    st.sampled_from(
        [
            "pacekeeper.dev/detect",
            "kopf.zalando.org/last-handled-configuration",
            "kubectl.kubernetes.io/last-applied-configuration",
            "example.com/note",
        ]
    ),
    _text,
)
_status = st.dictionaries(_text, st.one_of(st.floats(allow_nan=False), _text, st.none()))


@given(annotations=_annotations, status=_status)
def test_the_essence_is_kopfs_own(annotations: dict[str, str], status: dict[str, Any]) -> None:
    body = kopf.Body(report_body(annotations, status))
    ours = status_free_diff_base().build(body=body)
    theirs = kopf.AnnotationsDiffBaseStorage().build(body=body)
    assert ours == theirs


def test_status_is_not_copied() -> None:
    body = kopf.Body(report_body({}, {"report": {"ranks": [Uncopyable()]}}))
    with pytest.raises(AssertionError, match="deep-copied"):
        kopf.AnnotationsDiffBaseStorage().build(body=body)  # what Kopf alone does
    essence = status_free_diff_base().build(body=body)
    assert "status" not in essence
    assert essence["spec"] == {"control": {"probe": {"id": "p-1"}}}


def test_a_status_field_kopf_is_asked_to_keep_is_kept() -> None:
    raw = report_body({}, {"incarnation": "b", "report": {"sequence": 3}})
    body = kopf.Body(copy.deepcopy(raw))
    for fields in (["status.incarnation"], [("status", "incarnation")]):
        ours = status_free_diff_base().build(body=body, extra_fields=fields)
        assert ours == kopf.AnnotationsDiffBaseStorage().build(body=body, extra_fields=fields)
        assert ours["status"] == {"incarnation": "b"}


def test_the_heap_is_frozen_once_the_watches_confirmed_the_cache() -> None:
    """The long-lived caches leave the collector's full passes once the watch has
    delivered every primed object (``operator._sweep``), not before."""
    import asyncio
    import gc
    from types import SimpleNamespace

    from pacekeeper.controller.runtime import operator
    from pacekeeper.controller.runtime.shutdown import BlockingCalls
    from pacekeeper.controller.sources.world_cache import WorldCache

    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u1"}}
    cache = WorldCache()
    cache.prime([], [node])
    assert cache.unconfirmed() == 1
    gc.unfreeze()
    try:

        async def confirm_then_sweep() -> None:
            sweep = asyncio.create_task(
                operator._sweep(SimpleNamespace(cache=cache), BlockingCalls())  # type: ignore[arg-type]
            )
            await asyncio.sleep(0.05)
            assert gc.get_freeze_count() == 0  # the watch has not listed the node yet
            cache.put_node("ADDED", node)
            await asyncio.wait_for(sweep, timeout=5.0)

        operator.SWEEP_CHECK_S, saved = 0.2, operator.SWEEP_CHECK_S
        try:
            asyncio.run(confirm_then_sweep())
        finally:
            operator.SWEEP_CHECK_S = saved
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


def _same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (1 and 1.0 differ here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return bool(a == b)


@given(value=json_values)
def test_the_watch_decoder_gives_what_the_json_module_gives(value: Any) -> None:
    text = json.dumps({"type": "MODIFIED", "object": value})
    assert _same(watch_json.loads(text), json.loads(text))
    assert _same(watch_json.loads(text.encode()), json.loads(text.encode()))


@pytest.mark.parametrize(
    "text",
    [
        '"\\ud800"',  # a lone surrogate: the json module keeps it
        '{"a": NaN, "b": -Infinity}',  # the json module's extensions
        '{"a": 1, "a": 2}',  # the last of a repeated key
        "123456789012345678901234567890123456789",  # beyond 64 bits
        '{"x": 1e400}',  # beyond a double
    ],
)
def test_the_watch_decoder_gives_what_the_json_module_gives_at_the_edges(text: str) -> None:
    assert _same(watch_json.loads(text), json.loads(text))


def test_text_that_is_not_json_raises_the_json_modules_error() -> None:
    with pytest.raises(json.JSONDecodeError):
        watch_json.loads('{"type": "MODIFIED", "object": ')


def test_kopf_decodes_its_watch_streams_through_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from kopf._cogs.clients import api

    monkeypatch.setattr(api, "json", json)
    assert watch_json.install()
    assert api.json.loads is watch_json.loads
    assert api.json.dumps is json.dumps  # the rest of the module as it was
    assert watch_json.install()  # twice is once


def test_a_kopf_laid_out_otherwise_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    from kopf._cogs.clients import api

    other = object()
    monkeypatch.setattr(api, "json", other)
    assert not watch_json.install()
    assert api.json is other
