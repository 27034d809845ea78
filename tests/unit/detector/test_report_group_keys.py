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
