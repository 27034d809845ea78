"""Kernel identities stay stable and bounded; communication kernels are recognised."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacekeeper.cupti_ext.kernel_keys import (
    COMM_PATTERN_ENV,
    OVERFLOW_KEY,
    KernelKeyTable,
    comm_pattern_from_env,
    is_comm_kernel,
    readable_base,
    shape_bucket,
)

FILL = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"  # noqa: E501
NAMES = {1: FILL, 2: "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 3: "sm90_xmma_gemm_bf16bf16"}


def table(**kw) -> KernelKeyTable:
    return KernelKeyTable(resolve_name=NAMES.__getitem__, **kw)


def test_key_is_readable_and_separates_instantiations_and_launch_sizes():
    t = table()
    kids = t.lookup(np.array([1, 1, 1], np.uint64), np.array([512, 600, 4096], np.int64))
    keys = [t.keys[k] for k in kids]
    assert keys[0] == keys[1]  # 512 and 600 threads share the 2^9 bucket
    assert keys[0] != keys[2]
    assert keys[0].startswith("at::native::vectorized_elementwise_kernel~")
    assert t.full_names[kids[0]].startswith("void at::native::vectorized_elementwise_kernel<4")


def test_same_name_gives_the_same_key_in_every_process():
    a, b = table(), table()
    ka = a.lookup(np.array([1], np.uint64), np.array([512], np.int64))
    kb = b.lookup(np.array([1], np.uint64), np.array([512], np.int64))
    assert a.keys[ka[0]] == b.keys[kb[0]]


def test_shape_bucket_is_floor_log2():
    t = np.array([1, 2, 3, 4, 1023, 1024, 2**40], np.int64)
    assert shape_bucket(t).tolist() == [0, 1, 1, 2, 9, 10, 40]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 2**31), min_size=1, max_size=300))
def test_dynamic_shapes_never_exceed_the_key_cap(threads):
    names = {p: f"triton_poi_fused_{p}" for p in range(1, 50)}
    t = KernelKeyTable(max_keys=16, resolve_name=names.__getitem__)
    ptrs = np.array([1 + i % 49 for i in range(len(threads))], np.uint64)
    kids = t.lookup(ptrs, np.array(threads, np.int64))
    assert len({k for k in t.keys if k != OVERFLOW_KEY}) <= 16
    assert len(t.keys) <= 17
    assert t.overflowed == sum(t.keys[k] == OVERFLOW_KEY for k in kids)


def test_communication_kernels_are_flagged_and_never_overflow_into_compute_keys():
    t = table(max_keys=1)
    kids = t.lookup(np.array([1, 2, 3], np.uint64), np.array([512, 512, 512], np.int64))
    assert t.is_comm(kids).tolist() == [False, True, False]
    assert t.keys[kids[2]] == OVERFLOW_KEY


@pytest.mark.parametrize(
    "name",
    [
        "ncclDevKernel_AllGather_RING_LL",
        "ncclKernel_AllReduce_RING_LL_Sum_float",
        "void vllm::cross_device_reduce_1stage<float, 8>(...)",
        "void c10d::symmetric_memory::one_shot_all_reduce_kernel<float>",
        "nvshmemi_transfer_kernel",
        "reduce_scatter_kernel",
    ],
)
def test_collectives_are_communication_kernels(name):
    assert is_comm_kernel(name)


@pytest.mark.parametrize("name", [FILL, "sm90_xmma_gemm_bf16bf16", "triton_red_fused_sum_0"])
def test_compute_kernels_are_not_communication_kernels(name):
    assert not is_comm_kernel(name)


def test_extra_communication_pattern_comes_from_the_environment():
    pattern = comm_pattern_from_env({COMM_PATTERN_ENV: "my_p2p_.*"})
    assert pattern is not None and is_comm_kernel("my_p2p_send", pattern)
    assert comm_pattern_from_env({}) is None


def test_bad_communication_pattern_names_the_variable():
    with pytest.raises(ValueError, match=re.escape(COMM_PATTERN_ENV)):
        comm_pattern_from_env({COMM_PATTERN_ENV: "("})


def test_readable_base_drops_templates_and_parameters():
    assert readable_base(FILL) == "at::native::vectorized_elementwise_kernel"
    assert readable_base("sm90_xmma_gemm") == "sm90_xmma_gemm"
    assert len(readable_base("k" * 500)) <= 96
