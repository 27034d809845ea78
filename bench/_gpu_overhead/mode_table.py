"""The modes by the names ``--modes`` and ``--report-modes`` take (the bench's
docstring says what each measures): a factory per name, so each mode is built fresh
where it is measured. Apart so the names read as one list, beside none of the classes."""

from __future__ import annotations

from collections.abc import Callable

from .bare_modes import BareCupti, BareMarkers, BareRaw, BareToggle, ToggleVsBare
from .detector_modes import Nvrx, Ours, OursSwitchedVsBare, OursVsBare
from .mode import Mode
from .parts_mode import OursParts

MODES: dict[str, Callable[[], Mode]] = {
    "aa": Mode,
    "bare_raw": BareRaw,
    "bare_cupti": BareCupti,
    "bare_toggle": BareToggle,
    "bare_toggle_memset_kind": lambda: BareMarkers("bare_toggle_memset_kind", False),
    "bare_markers": lambda: BareMarkers("bare_markers", True),
    "ours_i1_vs_bare": OursVsBare,
    "ours_i1": lambda: Ours("ours_i1", 1),
    "ours_default": lambda: Ours("ours_default", None),
    # A report's fence flushing CUPTI forced, as before 2026-12-02's second session.
    "ours_i1_forced": lambda: Ours("ours_i1_forced", 1, forced_flush=True),
    # A report's fence with its marker always, as before 2026-12-02's sixth session.
    "ours_i1_marker_fence": lambda: Ours("ours_i1_marker_fence", 1, quiet_fence=False),
    # The detector's attribution named (gated, its default since 2026-12-03: records on
    # inside traced entries alone, no section markers), and section markers instead
    # (its default before, still a backend's with a per-section table).
    "ours_i1_gated": lambda: Ours("ours_i1_gated", 1, attribution="gated"),
    "ours_default_gated": lambda: Ours("ours_default_gated", None, attribution="gated"),
    "ours_i1_by_markers": lambda: Ours("ours_i1_by_markers", 1, attribution="markers"),
    "ours_default_by_markers": lambda: Ours("ours_default_by_markers", None, attribution="markers"),
    "ours_default_forced": lambda: Ours("ours_default_forced", None, forced_flush=True),
    "ours_i1_driver": lambda: Ours("ours_i1_driver", 1, marker="driver"),
    "ours_default_driver": lambda: Ours("ours_default_driver", None, marker="driver"),
    "ours_i1_markers": lambda: Ours("ours_i1_markers", 1, decode=False),
    "nvrx": Nvrx,
    "toggle_vs_bare": ToggleVsBare,
    "ours_switched_vs_bare": OursSwitchedVsBare,
    "ours_i1_parts": lambda: OursParts("ours_i1_parts", 1, vs_bare=True),
    "ours_default_parts": lambda: OursParts("ours_default_parts", None, vs_bare=False),
    # The same with smaller CUPTI buffers (PACEKEEPER_CUPTI_BUFFER_KIB).
    "ours_i1_parts_1mib": lambda: OursParts("ours_i1_parts_1mib", 1, True, 1024),
    "ours_i1_parts_2mib": lambda: OursParts("ours_i1_parts_2mib", 1, True, 2048),
    "ours_i1_1mib": lambda: Ours("ours_i1_1mib", 1, buffer_kib=1024),
    "ours_i1_2mib": lambda: Ours("ours_i1_2mib", 1, buffer_kib=2048),
    "ours_default_1mib": lambda: Ours("ours_default_1mib", None, buffer_kib=1024),
    # The larger buffers of 2026-11-30 to 2026-12-02 (the default is 1 MiB since).
    "ours_i1_4mib": lambda: Ours("ours_i1_4mib", 1, buffer_kib=4096),
    "ours_default_4mib": lambda: Ours("ours_default_4mib", None, buffer_kib=4096),
}
