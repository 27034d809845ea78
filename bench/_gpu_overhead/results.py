"""The run's result document: written as ``gpu_overhead.json`` after every mode (a
run cut short keeps what it measured) and printed as a table at the end. Apart from
the run so the layout of the figures reads in one place."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def save(result: dict[str, Any], out_dir: str) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_overhead.json").write_text(json.dumps(result, indent=2, default=str))


def print_table(result: dict[str, Any]) -> None:
    m = result["machine"]
    print(f"\n{result['date']}  {m['gpu']}  torch {m['torch']}  core {m['pinned_core']}")
    print(
        f"{'workload':14} {'mode':13} {'A ms':>8} {'B/A med':>8} {'p25':>6} {'p75':>6} "
        f"{'+us/step':>9} {'+us/kernel':>10}"
    )
    for wname, w in result["workloads"].items():
        for mname, r in w["modes"].items():
            if "error" in r:
                print(f"{wname:14} {mname:13} ERROR {r['error'].splitlines()[-1]}")
                continue
            per_k = r.get("added_per_kernel_us")
            print(
                f"{wname:14} {mname:13} {r['a_step_ms_median']:8.3f} {r['ratio_median']:8.4f} "
                f"{r['ratio_p25']:6.3f} {r['ratio_p75']:6.3f} {r['added_step_us_median']:9.1f} "
                f"{per_k if per_k is None else round(per_k, 3)!s:>10}"
            )
            st = r.get("steady_per_step")
            if st:
                kps = w["kernels_per_step"]
                print(
                    f"{'':14} steady: +{st['added_us']:.1f} us/step "
                    f"(hooks {st['hooks_us']:.1f}, callback {st['callback_us']:.1f}) = "
                    f"{st['added_us'] / kps if kps else float('nan'):.3f} us/kernel; "
                    f"first traced entry after a flush {st['first_after_flush_us']:.0f} us"
                )
        print(f"{wname:14} kernels/step {w['kernels_per_step']:.1f}")
    for key in [k for k in result if k.startswith("generate_report")]:
        _print_reports(key, result[key])


def _print_reports(key: str, reports: dict[str, Any]) -> None:
    print(f"\n{key} on one rank (ms):")
    for name, r in reports.items():
        if "error" in r:
            print(f"  {name:13} ERROR {r['error'].splitlines()[-1]}")
        else:
            print(
                f"  {name:13} first {r['first_ms']:7.3f}  warm median {r['warm_ms_median']:7.3f}"
                f"  min {r['warm_ms_min']:7.3f}  kernel keys {r['kernel_keys_in_report']}"
                f"  collect alone {r.get('collect_ms_median')}"
                f"  idle collect {r.get('collect_idle_ms_median')}"
                f"  parts {r.get('last_collect_after_steps')}"
                f"  last counts {(r.get('kernel_counts') or [None])[-1]}"
            )
            ratio = r.get("ratio_to_nvrx")
            if ratio:
                rounds = ", ".join(f"{x:.2f}" for x in ratio["per_round"])
                print(
                    f"  {'':13} over NVRx's, same round: median {ratio['median']:.2f}"
                    f"  max {ratio['max']:.2f}  ({rounds})"
                )
            phases = (r.get("phases") or {}).get("median_ms")
            if phases:
                print(f"  {'':13} phases: " + ", ".join(f"{k} {v:.3f}" for k, v in phases.items()))
