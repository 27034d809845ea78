"""The versioned score report: the one contract between a training job and the controller.

Torch-free and Kubernetes-free on purpose: the controller image imports this module and
nothing of the training stack. Field names on the wire are camelCase (the form the
StragglerReport status and the Ray ScoreBoard store); Python attributes are snake_case.

Scores follow one rule everywhere: ``None`` means "not measured" (no GPU, section not
entered in this window); a present score is finite and non-negative. NaN never travels.

Version 2 adds, per rank, where it sits in the job's parallel topology (``group``: the
ranks doing the same work; ``coords``: its data/pipeline/tensor/context-parallel
coordinates) and how much of the window it spent waiting in collectives
(``waitShare``), so the controller can compare a rank with its peers and tell the rank
the others wait for from the ones that wait. Version 1 reports still read: the new
fields are optional and absent means "not known".

Version 3 adds each rank's GPU identity (``gpuUuid``: the device's UUID as the driver
reports it, ``GPU-…``), so the controller can remember how a GPU scored against its
peers across jobs and restarts. It is the job's claim: the controller keys what it
remembers by the node the API places the rank on, never by the report's word alone.
Version 1 and 2 reports still read, without it.

Version 4 adds each rank's tail statistic (``sectionTail``: per section, the first
quartile over the second-highest of its last fifteen window times,
``scoring.tail_score``), so the controller sees a rank slow one window in three,
which every window's median hides. Older reports still read, without it.

Version 5 bounds the per-node summary of the Kubernetes form at any rank count: when
``summary.nodes`` would crowd out the ranks (tens of thousands of nodes), the bounded
form lists the worst nodes in full and counts the rest in ``summary.omittedNodes`` (how
many, their ranks, a histogram of their minima, the lowest of them). Every listed rank's
node is listed. Older reports still read: without ``omittedNodes`` every node is listed.

Version 6 adds each rank's broad GPU score (``gpuIndividualMedian``: the
kernel-time-weighted median of its kernels' scores against its own baseline,
``scoring.gpu_individual_median``), so the controller can tell a GPU slow in every
kernel from a rank whose data-dependent kernels had more work (data skew). Older
reports still read, without it: a policy then judges as before.

Version 7 adds the same against the peers (``gpuRelativeMedian``: the
kernel-time-weighted median of the per-kernel scores ``gpuRelative`` averages,
``scoring.gpu_relative_medians``), so the memory of hardware's peer check does not take
a skewed rank's relative mean for a GPU slower than any factor may be. Older reports
still read, without it: the peer check then reads the mean alone, as before.

Version 8 adds how the rank's fastest tenth of kernel time ran against its own baseline
(``gpuIndividualFast``, ``scoring.gpu_individual_fast``): a slow GPU slows every
kernel, data skew leaves the kernels of fixed work at the GPU's pace however much of
the time the skewed ones take. Older reports still read, without it: the sequential
test then reads the mean and the median, as before.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

SCHEMA_VERSION = 8
"""Bumped on any change a reader of an older version would misread. 2: per-rank
``group``, ``coords``, ``waitShare``; ``summary.peers`` in the bounded form. 3: per-rank
``gpuUuid``. 4: per-rank ``sectionTail``. 5: ``summary.omittedNodes`` (the bounded form
lists only the worst nodes of a very large job). 6: per-rank ``gpuIndividualMedian``.
7: per-rank ``gpuRelativeMedian``. 8: per-rank ``gpuIndividualFast``."""

K8S_STATUS_MAX_BYTES = 256 * 1024
"""Kubernetes status form must stay under this (etcd objects are limited to ~1.5 MiB and
large status patches make every watcher pay)."""

MAX_REPORT_BYTES = 64 * 1024 * 1024
"""The JSON form refuses anything larger: a report this big is a bug or an attack."""

REPLICA_DIMENSIONS = frozenset({"dp", "tp", "cp"})
"""Coordinates along which ranks do the same work: data-parallel replicas run the same
model on other data, tensor- and context-parallel ranks equal shares of one layer or one
sequence. Every other coordinate (``pp``, ``vpp``, ``ep``, your own) says which work a
rank does, so ranks that differ in it are not peers."""

MAX_COORDS = 8
"""Parallel dimensions a rank may carry (dp, pp, tp, cp, ep, vpp and a spare or two)."""

MAX_COORD_VALUE = 1 << 20

MAX_GPU_UUID = 80
"""Longest GPU identity accepted: NVIDIA's are 40 characters (``GPU-`` and a UUID), MIG
instances' 40 too (``MIG-…``); the rest is room for other vendors' forms."""

GPU_UUID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$"
"""Letters, digits and ``-_.:`` only: the identity ends up in ConfigMap keys, metric
labels and logs, where anything else would need escaping."""

MAX_PEER_SUMMARIES = 64
MAX_SEQUENCE = 2**53
"""The largest report sequence number: exact in every JSON reader (a float's mantissa)."""
MAX_WINDOW_S = 366 * 86400.0
"""The longest report window: a year. ``inf`` or more is no window a job measured."""
"""Peer groups whose statistics a summary keeps (the largest first): at most ~25 KB, so
that the Kubernetes form keeps room for the worst ranks beside 2,048 node minima."""


# The bounds are pydantic-core's own (no Python call per value): a 256-rank report holds
# about 2,000 scores, and a validator in Python per score was a quarter of the
# controller's CPU on a real kube-apiserver at 33 reports a second (docs/performance.md).
Score = Annotated[float | None, Field(ge=0.0, allow_inf_nan=False)]
"""A score: finite and at least 0 (None: not measured)."""
Share = Annotated[float | None, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
"""A share of the window: finite, within [0, 1] (None: not measured)."""
CoordName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,15}$")]
CoordValue = Annotated[int, Strict(), Field(ge=0, lt=MAX_COORD_VALUE)]
GpuUuid = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_GPU_UUID, pattern=GPU_UUID_PATTERN)
]


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="forbid",
        ser_json_inf_nan="strings",
    )


class Platform(StrEnum):
    KUBERNETES = "kubernetes"
    RAY = "ray"
    LOCAL = "local"


class JobIdentity(_Model):
    """Who sent the report. Kubernetes jobs are namespace/name; Ray jobs carry their id."""

    platform: Platform = Platform.LOCAL
    namespace: str | None = None
    name: str = Field(min_length=1, max_length=253)
    ray_job_id: str | None = None

    @model_validator(mode="after")
    def _platform_fields(self) -> Self:
        if self.platform is Platform.KUBERNETES and not self.namespace:
            raise ValueError("job.namespace is required when job.platform is 'kubernetes'")
        return self

    @property
    def key(self) -> str:
        """Stable key used by the ScoreBoard and the controller's per-job state."""
        if self.platform is Platform.KUBERNETES:
            return f"{self.namespace}/{self.name}"
        if self.platform is Platform.RAY and self.ray_job_id:
            return f"ray:{self.ray_job_id}"
        return f"{self.platform.value}:{self.name}"


class KernelTiming(_Model):
    """Which kernel-timing backend produced the GPU scores, and why it was chosen."""

    backend: str = "none"
    reason: str = ""
    dropped_records: int = Field(default=0, ge=0)
    attributed_records: int = Field(default=0, ge=0)
    """Kernel records of the reporting rank's window timed inside a traced section
    entry (optional, absent in older reports, like the three below)."""
    unattributed_records: int = Field(default=0, ge=0)
    """Kernel records traced but launched outside every traced section entry."""
    held_records: int = Field(default=0, ge=0)
    """Kernel records still waiting for their section's markers at the report (an entry
    open across it); they count in a later window."""
    lost_markers: int = Field(default=0, ge=0)
    """Section markers that never came: their entries' kernels count as unattributed."""


Rate = Annotated[float, Field(ge=0, allow_inf_nan=False)]


PROBE_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
"""A confirmation probe's request id: what the CRD's ``spec.control.probe.id`` accepts."""


class ProbeEvidence(_Model):
    """The confirmation probe's result on one rank (v3): throughputs of the same fixed
    work on every rank (``detector.probe``), higher is faster; a part that did not run
    is absent. Written by the job, like its scores: it only ever speaks for the nodes
    the job's own pods run on."""

    id: str = Field(pattern=f"^{PROBE_ID_PATTERN}$")
    """The request it answers (``spec.control.probe.id``)."""
    device: str = Field(pattern=r"^(cuda|cpu)$")
    gemm_tflops: Rate | None = None
    memory_gbps: Rate | None = None
    h2d_gbps: Rate | None = Field(default=None, alias="h2dGbps")
    cpu_gflops: Rate | None = None
    elapsed_ms: Rate = 0.0


class RankScores(_Model):
    rank: int = Field(ge=0)
    node: str = Field(min_length=1)
    pod: str | None = None
    ray_node_id: str | None = None
    pid: int | None = Field(default=None, ge=1)
    """The rank's process id: lets a Ray-side controller restart exactly this worker."""
    gpu_relative: Score = None
    gpu_individual: Score = None
    section_relative: dict[str, Score] = Field(default_factory=dict)
    section_individual: dict[str, Score] = Field(default_factory=dict)
    section_samples: int = Field(default=0, ge=0)
    """Section entries timed in this window (all sections together)."""
    kernel_samples: int = Field(default=0, ge=0)
    """Kernel records timed in this window."""
    group: str | None = Field(default=None, min_length=1, max_length=128)
    """Peer group: ranks with the same group do the same work (v2; None: not known)."""
    coords: dict[CoordName, CoordValue] | None = Field(default=None, max_length=MAX_COORDS)
    """Parallel coordinates, e.g. ``{"dp": 1, "pp": 3, "tp": 0}`` (v2; None: not known)."""
    wait_share: Share = None
    """Share of the window spent waiting in collectives and point-to-point transfers
    (v2; None: not measured)."""
    gpu_uuid: GpuUuid | None = None
    """The UUID of the GPU this rank ran on (v3; None: no GPU, or not known)."""
    probe: ProbeEvidence | None = None
    """The confirmation probe, in the report that answers a request (v3)."""
    section_tail: dict[str, Score] | None = None
    """Per section, the rank's tail score over its recent windows (v4; None: not
    measured, or too few windows yet). Not a ``worst_score``: policies judge it only
    when they say so (``score.tail``)."""

    gpu_individual_median: Score = None
    """The kernel-time-weighted median of the rank's kernel scores against its own
    baseline (v6; None: not measured). Beside ``gpu_individual``, their weighted mean:
    a slow GPU lowers both alike, data skew on a minority of the kernel time only the
    mean. Not a ``worst_score``: the sequential test reads it (docs/decision-rule.md,
    "Data skew against a slow GPU")."""

    gpu_individual_fast: Score = None
    """How the rank's fastest tenth of kernel time ran against its own baseline: the
    kernel-time-weighted 0.9 quantile of the scores ``gpu_individual_median`` reads (v8;
    None: not measured). A slow GPU lowers it with the median; data skew leaves it at
    1.0, since the kernels of fixed work keep the GPU's pace. Not a ``worst_score``: the
    sequential test reads it (docs/decision-rule.md, "Partial slowdowns")."""

    gpu_relative_median: Score = None
    """The kernel-time-weighted median of the rank's kernel scores against the peers'
    best (v7; None: not measured), beside ``gpu_relative``, their weighted mean. Not a
    ``worst_score``: the memory of hardware's peer check reads it (docs/decision-rule.md,
    "Data skew against a slow GPU: the relative median")."""

    def worst_tail(self) -> float | None:
        """Lowest tail score of any section, or None without any."""
        values = [v for v in (self.section_tail or {}).values() if v is not None]
        return min(values) if values else None

    def worst_score(self) -> float | None:
        """Lowest score of any kind on this rank, or None when nothing was measured."""
        values = [
            v
            for v in (
                self.gpu_relative,
                self.gpu_individual,
                *self.section_relative.values(),
                *self.section_individual.values(),
            )
            if v is not None
        ]
        return min(values) if values else None


def peer_key(r: RankScores) -> str:
    """Which ranks ``r`` is compared with: its ``group``; else its coordinates without
    the replica dimensions (``REPLICA_DIMENSIONS``); else the whole job (``""``)."""
    if r.group is not None:
        return f"group={r.group}"
    if r.coords:
        return ",".join(
            f"{k}={v}" for k, v in sorted(r.coords.items()) if k not in REPLICA_DIMENSIONS
        )
    return ""


class Spread(_Model):
    """Median and median absolute deviation of one relative score over a peer group."""

    median: float = Field(ge=0, allow_inf_nan=False)
    mad: float = Field(ge=0, allow_inf_nan=False)
    n: int = Field(ge=1)


class PeerSummary(_Model):
    """One peer group's statistics, kept in the bounded form so that a controller can
    still compare a listed rank with all its peers, not only the listed (worst) ones."""

    peers: str
    """``peer_key`` of the group (``""``: the whole job)."""
    ranks: int = Field(ge=0)
    spreads: dict[str, Spread] = Field(default_factory=dict)
    """By ``score_key``: ``gpuRelative``, ``gpuIndividual``, ``sectionRelative/<name>``,
    ``sectionIndividual/<name>``, ``sectionTail/<name>`` (v4), ``gpuIndividualMedian`` (v6),
    ``gpuRelativeMedian`` (v7), ``gpuIndividualFast`` (v8)."""


def score_key(kind: str, section: str | None = None) -> str:
    """Name of one score of a rank in ``PeerSummary.spreads``."""
    return kind if section is None else f"{kind}/{section}"


class NodeSummary(_Model):
    node: str
    ranks: int = Field(ge=0)
    min_score: Score = None
    worst_rank: int | None = None


NODE_SKETCH_EDGES = (0.25, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.98, 0.99)
"""Bin edges of ``NodeSketch.counts``: fine near the thresholds policies use."""


class NodeSketch(_Model):
    """The nodes a bounded form leaves out of ``Summary.nodes`` (v5): counted, never
    named, so a controller can count them (budgets, fractions) but never act on one."""

    nodes: int = Field(ge=1)
    ranks: int = Field(ge=0)
    unmeasured: int = Field(ge=0)
    """Nodes among them with no measured rank."""
    min_score: Score = None
    """The lowest node minimum among them (None: none measured): every omitted node's
    ranks score at least this."""
    max_score: Score = None
    """The highest node minimum among them."""
    edges: list[float] = Field(min_length=1, max_length=64)
    """Ascending bin edges of ``counts``."""
    counts: list[int] = Field(min_length=2, max_length=65)
    """Measured omitted nodes by their minimum: ``counts[0]`` below ``edges[0]``,
    ``counts[i]`` within ``[edges[i-1], edges[i])``, the last at or above ``edges[-1]``."""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if len(self.counts) != len(self.edges) + 1:
            raise ValueError(
                f"omittedNodes: {len(self.counts)} counts for {len(self.edges)} edges "
                f"(needs one more count than edges)"
            )
        if any(b <= a for a, b in zip(self.edges, self.edges[1:], strict=False)):
            raise ValueError(f"omittedNodes.edges must ascend, got {self.edges}")
        if any(c < 0 for c in self.counts) or self.unmeasured > self.nodes:
            raise ValueError("omittedNodes: counts and unmeasured must be within nodes")
        if sum(self.counts) != self.nodes - self.unmeasured:
            raise ValueError(
                f"omittedNodes: counts sum to {sum(self.counts)}, not nodes - unmeasured = "
                f"{self.nodes - self.unmeasured}"
            )
        return self


class Summary(_Model):
    """Statistics over all ranks; kept in full even when ranks are truncated (per-node
    entries beyond the bound are counted in ``omitted_nodes``)."""

    world_size: int = Field(ge=0)
    reported_ranks: int = Field(ge=0)
    min_score: Score = None
    median_score: Score = None
    p10_score: Score = None
    worst_rank: int | None = None
    nodes: list[NodeSummary] = Field(default_factory=list)
    peers: list[PeerSummary] = Field(default_factory=list, max_length=MAX_PEER_SUMMARIES)
    """Per peer group, the spread of each relative score over all its ranks (v2), so a
    bounded form that lists only the worst ranks still tells what their peers score."""
    omitted_nodes: NodeSketch | None = None
    """The nodes ``nodes`` leaves out (v5; None: every node is listed)."""

    @property
    def node_count(self) -> int:
        """Nodes of the job: the listed ones and the omitted ones."""
        return len(self.nodes) + (self.omitted_nodes.nodes if self.omitted_nodes else 0)


class ScoreReport(_Model):
    # Strict: "1" and 2.0 are not versions; a reader that coerced them would accept a
    # report whose writer never said which schema it followed.
    schema_version: Annotated[int, Strict()] = SCHEMA_VERSION
    job: JobIdentity
    sequence: Annotated[int, Strict(), Field(ge=0, le=MAX_SEQUENCE)]
    """Strict and at most 2**53: 1e30 would pass for a sequence no later report could
    follow, and JSON readers lose integers past 2**53."""
    generated_at: datetime
    window_s: float = Field(gt=0, le=MAX_WINDOW_S, allow_inf_nan=False)
    kernel_timing: KernelTiming = Field(default_factory=KernelTiming)
    ranks: list[RankScores]
    summary: Summary
    truncated: bool = False
    """True when only the worst ranks are listed (see ``compact``)."""

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, v: int) -> int:
        if v > SCHEMA_VERSION:
            raise ValueError(
                f"schemaVersion {v} is newer than this pacekeeper understands "
                f"({SCHEMA_VERSION}); upgrade the controller"
            )
        if v < 1:
            raise ValueError(f"schemaVersion must be >= 1, got {v}")
        return v

    @field_validator("generated_at")
    @classmethod
    def _aware(cls, v: datetime) -> datetime:
        if v.tzinfo is None:
            raise ValueError("generatedAt must carry a timezone (UTC)")
        return v.astimezone(UTC)

    @model_validator(mode="after")
    def _unique_ranks(self) -> Self:
        seen: set[int] = set()
        for r in self.ranks:
            if r.rank in seen:
                raise ValueError(f"ranks: rank {r.rank} appears twice")
            seen.add(r.rank)
        if self.summary.world_size and any(r.rank >= self.summary.world_size for r in self.ranks):
            bad = next(r.rank for r in self.ranks if r.rank >= self.summary.world_size)
            raise ValueError(f"ranks: rank {bad} is outside worldSize {self.summary.world_size}")
        if self.summary.omitted_nodes is not None:
            # A node without its summary would look smaller than it is (a rank action
            # taken for a whole node): a bounded form lists every listed rank's node.
            listed = {n.node for n in self.summary.nodes}
            for r in self.ranks:
                if r.node not in listed:
                    raise ValueError(
                        f"ranks: rank {r.rank}'s node {r.node!r} is not in summary.nodes, "
                        "which a report with summary.omittedNodes must list"
                    )
        return self

    # --- construction -------------------------------------------------------------

    @classmethod
    def build(
        cls,
        *,
        job: JobIdentity,
        sequence: int,
        generated_at: datetime,
        window_s: float,
        ranks: list[RankScores],
        world_size: int | None = None,
        kernel_timing: KernelTiming | None = None,
    ) -> ScoreReport:
        """Make a full report, computing the summary from the ranks."""
        ordered = sorted(ranks, key=lambda r: r.rank)
        return cls(
            job=job,
            sequence=sequence,
            generated_at=generated_at,
            window_s=window_s,
            kernel_timing=kernel_timing or KernelTiming(),
            ranks=ordered,
            summary=summarize(ordered, world_size if world_size is not None else len(ordered)),
        )

    # --- wire forms ---------------------------------------------------------------

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready dict (camelCase keys) stored in CR status and the ScoreBoard."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def to_json(self) -> str:
        return json.dumps(self.to_wire(), separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_wire(cls, data: dict[str, Any] | str | bytes) -> ScoreReport:
        """Parse and validate; raises ``ReportRejected`` naming the field on bad input."""
        if isinstance(data, str | bytes):
            if len(data) > MAX_REPORT_BYTES:
                raise ReportRejected(f"report is {len(data)} bytes, limit {MAX_REPORT_BYTES}")
            try:
                data = json.loads(data)
            except json.JSONDecodeError as e:
                raise ReportRejected(f"report is not valid JSON: {e}") from e
        if not isinstance(data, dict):
            raise ReportRejected(f"report must be a JSON object, got {type(data).__name__}")
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            raise ReportRejected(_describe(e)) from e


class ReportRejected(ValueError):
    """A report that failed validation at the boundary; the message names the field."""


def _describe(err: ValidationError) -> str:
    parts = []
    for e in err.errors()[:5]:
        loc = ".".join(str(p) for p in e["loc"]) or "<report>"
        parts.append(f"{loc}: {e['msg']}")
    more = err.error_count() - 5
    if more > 0:
        parts.append(f"... and {more} more")
    return "invalid score report: " + "; ".join(parts)


def summarize(ranks: list[RankScores], world_size: int) -> Summary:
    """Summary statistics over ranks (worst score per rank)."""
    worst: list[tuple[float, int]] = []
    by_node: dict[str, list[tuple[float | None, int]]] = {}
    for r in ranks:
        w = r.worst_score()
        by_node.setdefault(r.node, []).append((w, r.rank))
        if w is not None:
            worst.append((w, r.rank))
    nodes = []
    for node, items in sorted(by_node.items()):
        measured = [(w, rk) for w, rk in items if w is not None]
        low = min(measured) if measured else None
        nodes.append(
            NodeSummary(
                node=node,
                ranks=len(items),
                min_score=low[0] if low else None,
                worst_rank=low[1] if low else None,
            )
        )
    peers = peer_summaries(ranks)
    if not worst:
        return Summary(world_size=world_size, reported_ranks=len(ranks), nodes=nodes, peers=peers)
    values = sorted(w for w, _ in worst)
    lowest = min(worst)
    return Summary(
        world_size=world_size,
        reported_ranks=len(ranks),
        min_score=lowest[0],
        median_score=_quantile(values, 0.5),
        p10_score=_quantile(values, 0.1),
        worst_rank=lowest[1],
        nodes=nodes,
        peers=peers,
    )


def peer_summaries(ranks: Iterable[RankScores]) -> list[PeerSummary]:
    """Per peer group (``peer_key``), the spread of each of its scores; the
    ``MAX_PEER_SUMMARIES`` largest groups, by key. Groups with no score are left out."""
    groups: dict[str, list[RankScores]] = {}
    for r in ranks:
        groups.setdefault(peer_key(r), []).append(r)
    largest = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:MAX_PEER_SUMMARIES]
    out = []
    for key, members in sorted(largest):
        values: dict[str, list[float]] = {}
        for r in members:
            for name, v in _scores_of(r):
                if v is not None:
                    values.setdefault(name, []).append(v)
        spreads = {name: _spread(vs) for name, vs in sorted(values.items())}
        if spreads:
            out.append(PeerSummary(peers=key, ranks=len(members), spreads=spreads))
    return out


def _scores_of(r: RankScores) -> Iterable[tuple[str, float | None]]:
    yield "gpuRelative", r.gpu_relative
    yield "gpuIndividual", r.gpu_individual
    yield "gpuIndividualMedian", r.gpu_individual_median
    yield "gpuRelativeMedian", r.gpu_relative_median
    yield "gpuIndividualFast", r.gpu_individual_fast
    for name, v in r.section_relative.items():
        yield score_key("sectionRelative", name), v
    for name, v in r.section_individual.items():
        yield score_key("sectionIndividual", name), v
    for name, v in (r.section_tail or {}).items():
        yield score_key("sectionTail", name), v


def _spread(values: list[float]) -> Spread:
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    # Four decimals: a reference needs no more, and 64 groups x sections stay small.
    return Spread(median=round(med, 4), mad=round(mad, 4), n=len(values))


def _quantile(sorted_values: list[float], q: float) -> float:
    # Nearest-rank keeps the value one that a real rank had.
    idx = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[idx]
