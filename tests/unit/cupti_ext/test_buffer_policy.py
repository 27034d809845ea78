"""CUPTI's buffer policy (buffer_policy.py): one buffer for every thread and buffers we
zero, set before CUPTI is used, against the simulated CUPTI. On the H200 the same
policy is what tests/gpu and the report bench run with."""

from __future__ import annotations

import pytest
from fake_cupti import step

from pacekeeper.cupti_ext.buffer_policy import (
    THREAD_BUFFERS_ENV,
    ZERO_ENV,
    BufferPolicy,
    apply_buffer_policy,
    buffer_policy_from_env,
)
from pacekeeper.cupti_ext.cupti_backend import CuptiBackend

PER_THREAD = 9  # CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER
ZEROED_OUT = 5  # CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER


def test_the_environment_names_the_policy_and_a_bad_value_names_its_variable():
    assert buffer_policy_from_env({}) == BufferPolicy(per_thread=False, we_zero=True)
    env = {THREAD_BUFFERS_ENV: "Per-Thread", ZERO_ENV: " cupti "}
    assert buffer_policy_from_env(env) == BufferPolicy(per_thread=True, we_zero=False)
    with pytest.raises(ValueError, match=THREAD_BUFFERS_ENV):
        buffer_policy_from_env({THREAD_BUFFERS_ENV: "two"})
    with pytest.raises(ValueError, match=ZERO_ENV):
        buffer_policy_from_env({ZERO_ENV: "yes"})


def test_where_an_attribute_cannot_be_set_cuptis_default_is_reported():
    class NoSetter:
        pass

    assert apply_buffer_policy(NoSetter(), BufferPolicy()) == BufferPolicy(True, False)

    class Refuses:
        set: list[int] = []

        def activity_set_attribute(self, attr: int, size: int, value: int) -> None:
            if attr == PER_THREAD:  # a CUPTI older than 12.3
                raise RuntimeError("CUPTI_ERROR_INVALID_PARAMETER")
            self.set.append(attr)

    assert apply_buffer_policy(Refuses(), BufferPolicy()) == BufferPolicy(True, True)
    assert Refuses.set == [ZEROED_OUT]


def test_the_default_policy_is_set_before_cupti_is_used_and_every_buffer_comes_zeroed(
    fake, libcuda, names, marker
):
    b = CuptiBackend(cupti_module=fake, libcuda=libcuda, sample_every=1)
    try:
        assert fake.attributes == {PER_THREAD: 0, ZEROED_OUT: 1}
        assert fake.late_attributes == 0
        assert b._session.start_info == {"buffers": "raw", "thread_buffers": "one", "zero": "ours"}
        for _ in range(6):  # blocks come back to CUPTI, reused, window after window
            step(b, fake, "step", names["gemm"], 40)
            w = b.collect()
            assert w.records == 40 and w.dropped_records == 0
        assert len(fake.buffer_sizes) > 6
        assert fake.dirty_buffers == 0
        # The check has teeth: blocks handed back unzeroed are seen.
        b._raw.zero_after = False
        for _ in range(3):
            step(b, fake, "step", names["gemm"], 40)
            assert b.collect().records == 40
        assert fake.dirty_buffers > 0
    finally:
        b.shutdown()


def test_cuptis_own_policy_sets_nothing(fake, libcuda, names, monkeypatch):
    monkeypatch.setenv(THREAD_BUFFERS_ENV, "per-thread")
    monkeypatch.setenv(ZERO_ENV, "cupti")
    b = CuptiBackend(cupti_module=fake, libcuda=libcuda, sample_every=1)
    try:
        assert fake.attributes == {}
        assert b._session.start_info["zero"] == "cupti" and not b._raw.zero_after
        step(b, fake, "step", names["gemm"], 5)
        assert b.collect().records == 5
    finally:
        b.shutdown()


def test_a_resume_after_a_profiler_sets_no_attribute_again(fake, libcuda, names):
    from torch.profiler import ProfilerActivity, profile

    b = CuptiBackend(cupti_module=fake, libcuda=libcuda, sample_every=1)
    try:
        step(b, fake, "step", names["gemm"], 3)
        assert b.collect().records == 3
        with profile(activities=[ProfilerActivity.CPU]):
            step(b, fake, "step", names["gemm"], 3)
            assert b.paused
        for _ in range(2):
            step(b, fake, "step", names["gemm"], 3)
            assert b.collect().records == 3
        assert not b.paused
        assert fake.late_attributes == 0 and fake.dirty_buffers == 0
    finally:
        b.shutdown()


def test_a_bad_policy_fails_initialize_naming_the_variable(on_a_gpu, monkeypatch):
    from pacekeeper.cupti_ext.selection import select_backend

    monkeypatch.setenv(ZERO_ENV, "sometimes")
    with pytest.raises(ValueError, match=ZERO_ENV):
        select_backend("cupti")
