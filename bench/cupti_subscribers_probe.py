"""Can two CUPTI clients trace kernels side by side here? Asked of the CUPTI library the
process loads (the image's, or another one preloaded with ``--lib``), on the GPU's driver.

Each scenario runs in a fresh process (CUPTI's activity state is the process's):
- ``two_v2``: two subscribers made with ``cuptiSubscribe_v2`` asking to allow several,
  each with its own buffer callbacks (``cuptiActivityRegisterCallbacks_v2``) and its own
  kernel records switched on (``cuptiActivityEnable_v2``); ten kernels launched; how
  many kernel records each subscriber received, and the library's multi-subscriber
  state (``CUPTI_ACTIVITY_ATTR_MULTIPLE_SUBSCRIBER_STATE``). Both at ten: they coexist.
- ``v2_beside_profiler``: one such subscriber, and torch.profiler (Kineto, which uses
  the single-subscriber API of the CUPTI torch was built with) recording the same
  kernels: what each of them got.
- ``v2_off_then_profiler`` and ``v2_gone_then_profiler``: the subscriber traces ten
  kernels, then switches its kernel records off (and, the second, unsubscribes), then
  torch.profiler records ten: whether stepping aside lets a single-subscriber client in.
- ``profiler_then_v2``: torch.profiler recording, and a subscriber made during it.
- ``legacy``: the single-subscriber Activity API alone (what the detector uses today),
  as a control that this library traces kernels on this driver at all.

CUPTI's documentation (13.4) limits activity tracing to one subscriber on CUDA 13.2 or
older or with drivers older than r610, whatever the library says at subscription; the
counts here are what decides. Prints the findings and writes JSON to --out (default
$OUT, else bench/results). Used for issue 19's profiler coexistence: until two
subscribers both get every kernel on a lent machine, the detector pauses for another
profiler instead of sharing CUPTI with it (docs/kernel-timing.md).

Run: python3 bench/cupti_subscribers_probe.py [--lib PATH/libcupti.so.13] [--name N]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from pacekeeper.cupti_ext.cupti_buffers import (
    BufferCompleted,
    BufferCompletedV2,
    BufferRequested,
    BufferRequestedV2,
)
from pacekeeper.cupti_ext.cupti_subscriber import SubscriberParams

KERNELS = 10
_ATTR_MULTIPLE_SUBSCRIBER_STATE = 12
_KIND_CONCURRENT_KERNEL = 10

_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)


class _Lib:
    """The libcupti this process loaded (a preloaded one wins: same soname)."""

    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcupti.so.13")
        self.keep: list[Any] = []

    def result(self, rc: int) -> str:
        text = ctypes.c_char_p()
        self.lib.cuptiGetResultString(rc, ctypes.byref(text))
        return f"{rc} {text.value.decode() if text.value else ''}".strip()

    def version(self) -> int:
        v = ctypes.c_uint32()
        self.lib.cuptiGetVersion(ctypes.byref(v))
        return v.value

    def has(self, name: str) -> bool:
        return hasattr(self.lib, name)

    def subscribe_v2(self, name: bytes) -> tuple[int | None, dict[str, Any]]:
        if not self.has("cuptiSubscribe_v2"):
            return None, {"result": "no cuptiSubscribe_v2 in this library"}
        old = ctypes.create_string_buffer(256)
        # The size CUPTI's macro gives (up to the last field, no tail padding).
        size = SubscriberParams.allow_multiple_subscribers.offset + 1
        params = SubscriberParams(size, name, None, len(old), 1)
        params.old_subscriber_name = ctypes.cast(old, ctypes.c_char_p)
        handle = ctypes.c_void_p()
        callback = _CALLBACK(lambda *a: None)
        self.keep += [callback, params, old]
        rc = self.lib.cuptiSubscribe_v2(ctypes.byref(handle), callback, None, ctypes.byref(params))
        info = {"result": self.result(rc), "other": old.value.decode(errors="replace")}
        return (handle.value if rc == 0 else None), info

    def multiple_state(self, handle: int) -> Any:
        if not self.has("cuptiActivityGetAttribute_v2"):
            return None
        value = ctypes.c_uint8(255)
        size = ctypes.c_size_t(1)
        rc = self.lib.cuptiActivityGetAttribute_v2(
            ctypes.c_void_p(handle),
            _ATTR_MULTIPLE_SUBSCRIBER_STATE,
            ctypes.byref(size),
            ctypes.byref(value),
        )
        return int(value.value) if rc == 0 else self.result(rc)


class _Counter:
    """Buffer callbacks that count kernel records, by the record's kind field."""

    def __init__(self, lib: _Lib, handle: int | None) -> None:
        self.lib, self.handle = lib, handle
        self.kernels = 0
        self.records = 0
        self.blocks: dict[int, Any] = {}

    def _request(self, buf: Any, size: Any, maxr: Any, *_: Any) -> None:
        block = ctypes.create_string_buffer(1 << 20)
        self.blocks[ctypes.addressof(block)] = block
        buf[0], size[0], maxr[0] = ctypes.addressof(block), 1 << 20, 0

    def _walk(self, buf: int, valid: int) -> None:
        record = ctypes.c_void_p()
        args: tuple[Any, ...] = (ctypes.c_void_p(buf), ctypes.c_size_t(valid), ctypes.byref(record))
        if self.handle is None:
            get = self.lib.lib.cuptiActivityGetNextRecord
        else:  # a subscriber's buffer is read with its handle (cupti_activity.h)
            get = self.lib.lib.cuptiActivityGetNextRecord_v2
            args = (ctypes.c_void_p(self.handle), *args)
        while get(*args) == 0:
            self.records += 1
            if ctypes.c_uint32.from_address(record.value).value == _KIND_CONCURRENT_KERNEL:
                self.kernels += 1

    def v2(self) -> tuple[Any, Any]:
        def done(buf: int, _size: int, valid: int, _info: Any) -> None:
            if buf and valid:
                self._walk(buf, valid)

        pair = (BufferRequestedV2(self._request), BufferCompletedV2(done))
        self.lib.keep += list(pair)
        return pair

    def legacy(self) -> tuple[Any, Any]:
        def done(_ctx: Any, _stream: int, buf: int, _size: int, valid: int) -> None:
            if buf and valid:
                self._walk(buf, valid)

        pair = (BufferRequested(self._request), BufferCompleted(done))
        self.lib.keep += list(pair)
        return pair


def _launch(torch: Any) -> None:
    x = torch.ones(4096, device="cuda")
    for _ in range(KERNELS):
        x.add_(1.0)
    torch.cuda.synchronize()


def _v2_subscriber(lib: _Lib, name: bytes) -> tuple[_Counter | None, dict[str, Any]]:
    handle, info = lib.subscribe_v2(name)
    if handle is None:
        return None, info
    counter = _Counter(lib, handle)
    requested, completed = counter.v2()
    h = ctypes.c_void_p(handle)
    info["register"] = lib.result(
        lib.lib.cuptiActivityRegisterCallbacks_v2(h, requested, completed)
    )
    info["enable"] = lib.result(lib.lib.cuptiActivityEnable_v2(h, _KIND_CONCURRENT_KERNEL, None))
    info["multiple_state"] = lib.multiple_state(handle)
    return counter, info


def scenario(name: str) -> dict[str, Any]:
    import torch

    torch.ones(1, device="cuda")
    torch.cuda.synchronize()
    lib = _Lib()
    out: dict[str, Any] = {"cupti_api_version": lib.version()}
    if name == "legacy":
        counter = _Counter(lib, None)
        requested, completed = counter.legacy()
        lib.lib.cuptiActivityRegisterCallbacks(requested, completed)
        lib.lib.cuptiActivityEnable(_KIND_CONCURRENT_KERNEL)
        _launch(torch)
        lib.lib.cuptiActivityFlushAll(1)
        out["kernels"] = counter.kernels
        return out
    if not lib.has("cuptiActivityEnable_v2"):
        out["error"] = "no per-subscriber Activity API (cuptiActivityEnable_v2) in this library"
        return out
    if name == "profiler_then_v2":
        got = _profiled(torch, lib, out, late=True)
        late = got.pop("_late", None)
        lib.lib.cuptiActivityFlushAll(1)
        out.update(got, kernels=None if late is None else late.kernels)
        out["coexist"] = out["kernels"] == KERNELS + 1 and got.get("profiler_kernels") == KERNELS
        return out
    first, out["first"] = _v2_subscriber(lib, b"pacekeeper-probe-a")
    if name == "two_v2":
        second, out["second"] = _v2_subscriber(lib, b"pacekeeper-probe-b")
        _launch(torch)
        lib.lib.cuptiActivityFlushAll(1)
        # Ten adds, and the fill of the tensor they add to.
        out["kernels"] = [None if c is None else c.kernels for c in (first, second)]
        out["coexist"] = out["kernels"] == [KERNELS + 1, KERNELS + 1]
        return out
    if name in ("v2_off_then_profiler", "v2_gone_then_profiler") and first is not None:
        _launch(torch)
        h = ctypes.c_void_p(first.handle)
        out["disable"] = lib.result(
            lib.lib.cuptiActivityDisable_v2(h, _KIND_CONCURRENT_KERNEL, None)
        )
        lib.lib.cuptiActivityFlushAll(1)
        out["kernels_before"] = first.kernels
        if name == "v2_gone_then_profiler":
            out["unsubscribe"] = lib.result(lib.lib.cuptiUnsubscribe(h))
    out.update(_profiled(torch, lib, out, late=False))
    lib.lib.cuptiActivityFlushAll(1)
    out["kernels"] = None if first is None else first.kernels
    if name == "v2_beside_profiler":
        out["coexist"] = out["kernels"] == KERNELS + 1 and out.get("profiler_kernels") == KERNELS
    else:  # stepped aside: the profiler's kernels are its own alone
        out["profiler_got_all"] = out.get("profiler_kernels") == KERNELS
    return out


def _profiled(torch: Any, lib: _Lib, out: dict[str, Any], *, late: bool) -> dict[str, Any]:
    """Ten adds under torch.profiler (with ``late``, a subscriber made once it runs):
    how many of them the profiler saw."""
    from torch.profiler import ProfilerActivity, profile

    got: dict[str, Any] = {}
    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            if late:
                got["_late"], out["first"] = _v2_subscriber(lib, b"pacekeeper-probe-late")
            _launch(torch)
        got["profiler_kernels"] = sum(
            1
            for e in prof.events()
            if e.device_type == torch.autograd.DeviceType.CUDA and "add" in e.name.lower()
        )
    except Exception as e:  # the profiler may refuse to start beside another subscriber
        got["profiler_error"] = repr(e)
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", default="", help="a libcupti.so.13 to preload ('' the image's)")
    ap.add_argument(
        "--out", default=os.environ.get("OUT") or str(Path(__file__).parent / "results")
    )
    ap.add_argument("--name", default="cupti_subscribers.json")
    ap.add_argument("--scenario", default="", help=argparse.SUPPRESS)  # the child's
    args = ap.parse_args()
    if args.scenario:
        print(json.dumps(scenario(args.scenario)))
        return 0
    driver = ctypes.c_int()
    ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(driver))
    found: dict[str, Any] = {"driver_cuda_version": driver.value, "lib": args.lib or "image"}
    env = dict(os.environ)
    if args.lib:
        env["LD_PRELOAD"] = str(Path(args.lib).resolve())
    for name in (
        "legacy",
        "two_v2",
        "v2_beside_profiler",
        "v2_off_then_profiler",
        "v2_gone_then_profiler",
        "profiler_then_v2",
    ):
        proc = subprocess.run(
            [sys.executable, __file__, "--scenario", name],
            env=env,
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        found[name] = (
            json.loads(lines[-1])
            if proc.returncode == 0 and lines
            else {"rc": proc.returncode, "tail": (proc.stdout + proc.stderr)[-1500:]}
        )
    print(json.dumps(found, indent=1))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / args.name).write_text(json.dumps(found, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
