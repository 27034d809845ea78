"""Where the detector's own group keeps its keys in the job's store: the same on every
member (a pure function of what every member sees alike), new for each restart, each
default group and each group made, so no attempt ever reads another's peers."""

from __future__ import annotations

import pytest

from pacekeeper.detector import report_group


@pytest.fixture(autouse=True)
def fresh_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report_group, "_worlds", [None, 0])
    monkeypatch.setattr(report_group, "_made", type(report_group._made)())


def test_two_members_making_the_same_groups_in_turn_agree_on_every_prefix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def member() -> list[str]:
        report_group._worlds[:] = [None, 0]
        report_group._made.clear()
        world, later_world = object(), object()
        return [
            report_group._key_prefix(world, (0, 1, 2)),
            report_group._key_prefix(world, (0, 1, 2)),  # made again (after a failure)
            report_group._key_prefix(world, (0, 1)),
            report_group._key_prefix(later_world, (0, 1, 2)),  # a new default group
        ]

    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "0")
    first, second = member(), member()
    assert first == second
    assert len(set(first)) == 4


def test_a_restart_uses_other_keys_for_the_same_group(monkeypatch: pytest.MonkeyPatch) -> None:
    world = object()
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "0")
    before = report_group._key_prefix(world, (0, 1))
    report_group._worlds[:] = [None, 0]
    report_group._made.clear()
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    after = report_group._key_prefix(world, (0, 1))
    assert before != after
    assert before.startswith("pacekeeper/report-group/r0/")
    assert after.startswith("pacekeeper/report-group/r1/")
    monkeypatch.delenv("TORCHELASTIC_RESTART_COUNT")
    report_group._made.clear()
    assert report_group._key_prefix(world, (0, 1)).startswith("pacekeeper/report-group/r-/")


def test_the_group_is_described_again_only_for_a_new_default_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pacekeeper.detector import gather

    worlds = [object()]
    described: list[int] = []

    def describe(group: object) -> gather.GroupInfo:
        described.append(len(worlds))
        n = len(worlds)  # each new world is one rank larger
        return gather.GroupInfo(True, 0, n, 0, n, tuple(range(n)), "gloo")

    monkeypatch.setattr(gather, "default_group", lambda: worlds[-1])
    monkeypatch.setattr(gather, "describe_group", describe)
    group = report_group.ReportGroup(None, backend=None, timeout_s=5.0)
    assert group.describe().world_size == 1
    assert group.describe().world_size == 1
    assert described == [1]  # a process group's ranks do not change while it lives
    worlds.append(object())  # destroy_process_group + init_process_group
    assert group.describe().world_size == 2
    assert described == [1, 2]


def test_without_a_default_group_the_group_is_read_at_every_report(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pacekeeper.detector import gather

    calls: list[object] = []
    monkeypatch.setattr(gather, "default_group", lambda: None)

    def describe(group: object) -> gather.GroupInfo:
        calls.append(group)
        return gather.GroupInfo(False, 0, 1, 0, 1, (0,), "none")

    monkeypatch.setattr(gather, "describe_group", describe)
    group = report_group.ReportGroup(None, backend=None, timeout_s=5.0)
    group.describe()
    group.describe()
    assert len(calls) == 2
