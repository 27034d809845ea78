"""What the operator spends beside its decisions: Kopf's diff base (its essence exactly, without
deep-copying status) and the collector (the long-lived heap frozen once the cache settled)."""

from __future__ import annotations

import copy
from typing import Any

import kopf
import pytest
from hypothesis import given
from hypothesis import strategies as st

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
