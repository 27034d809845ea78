"""Label and field selectors on list, as the real API server applies them."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from .objects import pod
from .selectors import SelectorError, label_selector_matches, parse_label_selector


@pytest.fixture
def labelled_pods(core_v1: Any) -> None:
    core_v1.create_namespaced_pod(
        "default", pod("a", labels={"job": "j1", "rank": "0"}, node_name="n1")
    )
    core_v1.create_namespaced_pod(
        "default", pod("b", labels={"job": "j1", "rank": "1"}, node_name="n2")
    )
    core_v1.create_namespaced_pod("default", pod("c", labels={"job": "j2"}, node_name="n1"))


def _names(core_v1: Any, **kwargs: Any) -> list[str]:
    return [p.metadata.name for p in core_v1.list_namespaced_pod("default", **kwargs).items]


@pytest.mark.usefixtures("labelled_pods")
@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("job=j1", ["a", "b"]),
        ("job==j1,rank=1", ["b"]),
        ("job!=j1", ["c"]),
        ("job in (j2, j3)", ["c"]),
        ("job notin (j2),rank", ["a", "b"]),
        ("!rank", ["c"]),
        ("", ["a", "b", "c"]),
    ],
)
def test_label_selector_filters_the_list(core_v1: Any, selector: str, expected: list[str]) -> None:
    assert _names(core_v1, label_selector=selector) == expected


@pytest.mark.usefixtures("labelled_pods")
def test_field_selector_filters_on_name_and_node(core_v1: Any) -> None:
    assert _names(core_v1, field_selector="metadata.name=b") == ["b"]
    assert _names(core_v1, field_selector="spec.nodeName=n1") == ["a", "c"]
    assert _names(core_v1, field_selector="spec.nodeName!=n1,metadata.name!=a") == ["b"]


@pytest.mark.usefixtures("labelled_pods")
def test_selectors_apply_across_namespaces(core_v1: Any) -> None:
    core_v1.create_namespaced_pod("other", pod("d", namespace="other", labels={"job": "j1"}))
    listed = core_v1.list_pod_for_all_namespaces(label_selector="job=j1").items
    assert [(p.metadata.namespace, p.metadata.name) for p in listed] == [
        ("default", "a"),
        ("default", "b"),
        ("other", "d"),
    ]


def test_malformed_selector_is_400(core_v1: Any) -> None:
    with pytest.raises(ApiException) as caught:
        core_v1.list_namespaced_pod("default", label_selector="job in j1")
    assert caught.value.status == 400


def test_label_selector_parser_refuses_garbage() -> None:
    with pytest.raises(SelectorError, match="unable to parse"):
        parse_label_selector("a=b,=c")


def test_structured_selector_match_expressions() -> None:
    selector = {
        "matchLabels": {"app": "t"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["gpu"]},
            {"key": "skip", "operator": "DoesNotExist"},
        ],
    }
    assert label_selector_matches(selector, {"app": "t", "tier": "gpu"})
    assert not label_selector_matches(selector, {"app": "t", "tier": "cpu"})
    assert not label_selector_matches(selector, {"app": "t", "tier": "gpu", "skip": "1"})
