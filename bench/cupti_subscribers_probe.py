"""Can two CUPTI subscribers coexist here? Asked of the CUPTI library the process loads
(the image's, or a newer one put first on ``LD_LIBRARY_PATH``), on the GPU's driver.

- the CUPTI and driver versions;
- ``cuptiSubscribe_v2`` asking to allow several subscribers, twice: each call's result
  (CUPTI 13.2 and later have the call; CUPTI documents the multi-subscriber mode of the
  Activity API from 13.5; a driver that cannot serve it refuses);
- whether the Activity API gives kernel records with this library on this driver at
  all (kernels launched inside an enable/flush, counted).

Prints the findings and writes JSON to --out (default $OUT, else bench/results). Used
for issue 19's profiler coexistence: until both calls succeed on a lent machine, the
detector pauses for another profiler instead of sharing CUPTI with it.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
from pathlib import Path
from typing import Any

_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)


class _SubscriberParams(ctypes.Structure):
    # CUpti_SubscriberParams as CUPTI 13.2 documents it; ``structSize`` tells a newer
    # library which fields the caller knows.
    _fields_ = (
        ("struct_size", ctypes.c_size_t),
        ("subscriber_name", ctypes.c_char_p),
        ("old_subscriber_name", ctypes.c_char_p),
        ("old_subscriber_size", ctypes.c_size_t),
        ("allow_multiple_subscribers", ctypes.c_uint8),
    )


def _result(lib: Any, rc: int) -> str:
    text = ctypes.c_char_p()
    lib.cuptiGetResultString(rc, ctypes.byref(text))
    return f"{rc} {text.value.decode() if text.value else ''}".strip()


def _subscribe(lib: Any, name: bytes, keep: list[Any]) -> dict[str, Any]:
    if not hasattr(lib, "cuptiSubscribe_v2"):
        return {"result": "no cuptiSubscribe_v2 in this library"}
    old = ctypes.create_string_buffer(256)
    # The size CUPTI's macro gives (up to the last field, no tail padding); a library
    # that knows fewer fields (13.0's has no allowMultipleSubscribers) refuses it.
    size = _SubscriberParams.allow_multiple_subscribers.offset + 1
    params = _SubscriberParams(size, name, None, len(old), 1)
    params.old_subscriber_name = ctypes.cast(old, ctypes.c_char_p)
    handle = ctypes.c_void_p()
    callback = _CALLBACK(lambda *a: None)
    keep += [callback, params, old]
    rc = lib.cuptiSubscribe_v2(ctypes.byref(handle), callback, None, ctypes.byref(params))
    return {
        "result": _result(lib, rc),
        "ok": rc == 0,
        "other": old.value.decode(errors="replace"),
        "handle": handle.value,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out", default=os.environ.get("OUT") or str(Path(__file__).parent / "results")
    )
    ap.add_argument("--name", default="cupti_subscribers.json")
    args = ap.parse_args()
    import torch

    torch.ones(1, device="cuda")
    torch.cuda.synchronize()
    lib = ctypes.CDLL("libcupti.so.13")
    version = ctypes.c_uint32()
    lib.cuptiGetVersion(ctypes.byref(version))
    driver = ctypes.c_int()
    ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(driver))
    found: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(0),
        "cupti_api_version": version.value,
        "driver_cuda_version": driver.value,
        "ld_library_path": os.environ.get("LD_LIBRARY_PATH", ""),
    }
    keep: list[Any] = []
    found["first_subscriber"] = _subscribe(lib, b"pacekeeper-probe-a", keep)
    found["second_subscriber"] = _subscribe(lib, b"pacekeeper-probe-b", keep)
    found["coexist"] = bool(
        found["first_subscriber"].get("ok") and found["second_subscriber"].get("ok")
    )
    for key in ("first_subscriber", "second_subscriber"):
        handle = found[key].pop("handle", None)
        if handle:
            lib.cuptiUnsubscribe(ctypes.c_void_p(handle))
    found["kernel_records"] = _kernel_records(torch)
    print(json.dumps(found, indent=1))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / args.name).write_text(json.dumps(found, indent=1) + "\n")
    return 0


def _kernel_records(torch: Any) -> dict[str, Any]:
    """Kernel records through cupti-python's Activity API with the library loaded."""
    try:
        from cupti import cupti as c
    except Exception as e:  # the library cupti-python found may not load at all
        return {"error": repr(e)}
    got: list[int] = []

    def done(acts: Any) -> None:
        got.extend(1 for a in acts if int(a.kind) == int(c.ActivityKind.CONCURRENT_KERNEL))

    try:
        c.activity_register_callbacks(lambda: (1 << 20, 0), done)
        c.activity_enable(c.ActivityKind.CONCURRENT_KERNEL)
        x = torch.ones(256, device="cuda")
        for _ in range(10):
            x = x + 1
        torch.cuda.synchronize()
        c.activity_disable(c.ActivityKind.CONCURRENT_KERNEL)
        c.activity_flush_all(1)
    except Exception as e:
        return {"error": repr(e), "records": len(got)}
    return {"launched": 10, "records": len(got)}


if __name__ == "__main__":
    raise SystemExit(main())
