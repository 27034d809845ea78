"""CUDA-event timing of sections. No GPU here: a stand-in for torch's CUDA events that
completes on demand (the only part of torch.cuda this backend uses)."""

from __future__ import annotations

from types import SimpleNamespace

from pacekeeper.cupti_ext.events_backend import SECTION_KEY_PREFIX, EventsBackend


class Clock:
    def __init__(self) -> None:
        self.now_ms = 0.0
        self.done_until = float("inf")


def fake_torch(clock: Clock) -> SimpleNamespace:
    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            self.t = 0.0

        def record(self) -> None:
            self.t = clock.now_ms

        def query(self) -> bool:
            return self.t <= clock.done_until

        def elapsed_time(self, other: Event) -> float:
            return other.t - self.t

    return SimpleNamespace(cuda=SimpleNamespace(Event=Event))


def section(b: EventsBackend, clock: Clock, name: str, ms: float) -> None:
    b.start(name)
    clock.now_ms += ms
    b.stop(name)


def test_each_section_gets_its_gpu_time_and_outermost_sections_feed_the_gpu_score():
    clock = Clock()
    b = EventsBackend(torch_module=fake_torch(clock))
    for _ in range(3):
        b.start("step")
        section(b, clock, "forward", 2.0)
        clock.now_ms += 1.0
        b.stop("step")
    w = b.collect()
    assert set(w.kernels) == {SECTION_KEY_PREFIX + "step"}
    assert w.kernels["section:step"].median_ns == 3e6
    assert w.sections["forward"]["section:forward"].num == 3
    assert w.sections["forward"]["section:forward"].median_ns == 2e6
    assert w.records == 3


def test_unfinished_event_pairs_wait_for_the_next_window():
    clock = Clock()
    b = EventsBackend(torch_module=fake_torch(clock))
    section(b, clock, "step", 1.0)
    clock.done_until = clock.now_ms
    section(b, clock, "step", 1.0)
    assert b.collect().records == 1
    clock.done_until = float("inf")
    assert b.collect().records == 1


def test_pending_pairs_are_bounded_and_drops_are_reported():
    clock = Clock()
    clock.done_until = -1.0
    b = EventsBackend(torch_module=fake_torch(clock), max_pending=4)
    for _ in range(10):
        section(b, clock, "step", 1.0)
    clock.done_until = float("inf")
    w = b.collect()
    assert w.dropped_records == 6 and w.records == 4


def test_stop_without_start_is_ignored():
    b = EventsBackend(torch_module=fake_torch(Clock()))
    b.stop("step")
    assert b.collect().records == 0
