"""The parts of ``bench/gpu_overhead.py``, the GPU overhead benchmark of the
kernel-timing backends (the entry point there parses the flags and documents the
modes). A package so each concern reads alone: the steps timed (``workloads``), what
each timing mode switches on (``mode``, ``bare_modes``, ``detector_modes``,
``parts_mode``, ``mode_table``), the paired A/B method (``paired``), the steady-state
arithmetic checked on the CPU (``steady``), the diagnostics (``entry_calls``,
``marker_diagnostics``, ``detector_diagnostics``), generate_report's cost
(``report_timing``), the CPU record path's cost (``record_cost``), the whole GPU run
(``run``) and its JSON and table (``results``).

Modules here import no torch, CUDA or cupti at import time (inside functions, as the
bench needs them), so every one imports on a CPU-only machine.
"""
