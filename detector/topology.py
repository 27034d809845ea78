"""Where this rank sits in the job's parallel layout: its peer group and coordinates.

The controller compares a rank with its peers, the ranks doing the same work
(``score_report.peer_key``): data-, tensor- and context-parallel replicas of one
pipeline stage are peers; two stages are not, and a stage with more work is structure,
not a slow GPU. The detector cannot see that layout; the job hands it over, on every
rank, with ``Detector.set_topology`` in one of these forms:

* ``mesh=``: a ``torch.distributed.DeviceMesh`` with named dimensions
  (``init_device_mesh("cuda", (2, 4), mesh_dim_names=("pp", "dp"))``): this rank's
  coordinate along each;
* ``groups=``: a mapping of dimension name to the process group of that dimension
  (``{"dp": dp_group, "pp": pp_group, "tp": tp_group}``): this rank's rank in each;
* ``coords=``: the coordinates themselves, e.g. from Megatron's ``parallel_state``
  (docs/detector.md, "Peer groups");
* ``group=``: a name for the role, when ranks that do the same work share it.

Several forms may be given together; a dimension given twice must agree. The result
travels in each rank's payload into its ``RankScores.group`` / ``coords``. A job that
calls nothing gets the layout found for it (``topology_discovery``); ``set_topology``
overrides that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .score_report import MAX_COORD_VALUE, MAX_COORDS
from .topology_partition import NAME as _NAME

_GROUP_MAX = 128


@dataclass(frozen=True, slots=True)
class Topology:
    group: str | None = None
    coords: Mapping[str, int] | None = None
    found: bool = False
    """Discovered by the detector (``topology_discovery``), not given by the job: a
    later discovery may replace it, never what ``set_topology`` gave."""


def topology_of(
    *,
    coords: Mapping[str, int] | None = None,
    mesh: Any = None,
    groups: Mapping[str, Any] | None = None,
    group: str | None = None,
) -> Topology:
    """This rank's ``Topology`` from what the job gives; ValueError names the argument."""
    found: dict[str, int] = {}

    def put(source: str, name: Any, value: Any) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(
                f"{source}: dimension name {name!r} must match {_NAME.pattern} (e.g. 'dp')"
            )
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{source}[{name!r}]: coordinate must be an int, got {value!r}")
        if not 0 <= value < MAX_COORD_VALUE:
            raise ValueError(f"{source}[{name!r}]: coordinate {value} is out of range")
        if name in found and found[name] != value:
            raise ValueError(
                f"{source}[{name!r}]: {value} contradicts {found[name]} given for {name!r}"
            )
        found[name] = value

    for name, value in (coords or {}).items():
        put("coords", name, value)
    if mesh is not None:
        names = getattr(mesh, "mesh_dim_names", None)
        if not names:
            raise ValueError("mesh: give the DeviceMesh mesh_dim_names (e.g. ('pp', 'dp'))")
        where = mesh.get_coordinate()
        if where is None:
            raise ValueError("mesh: this rank is not in the DeviceMesh")
        for name, value in zip(names, where, strict=True):
            put("mesh", name, int(value))
    if groups:
        import torch.distributed as dist

        for name, pg in groups.items():
            value = dist.get_rank(pg)
            if value < 0:
                raise ValueError(f"groups[{name!r}]: this rank is not a member of that group")
            put("groups", name, int(value))
    if len(found) > MAX_COORDS:
        raise ValueError(f"coordinates: at most {MAX_COORDS} dimensions, got {len(found)}")
    if group is not None and (not isinstance(group, str) or not 0 < len(group) <= _GROUP_MAX):
        raise ValueError(f"group: a non-empty name of at most {_GROUP_MAX} characters")
    return Topology(group=group, coords=dict(sorted(found.items())) or None)
