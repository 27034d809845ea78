"""Time to act at scale: status update -> the controller's first action, with its CPU and memory.

The real controller (`pacekeeper operator run`, Kopf + Lease election, as the chart starts
it) runs as a separate process against the test API harness over HTTP. The world follows
the trust rules: every job's pods are owned by its Job (ownerReferences with the Job's
uid), and the real reporter sink (run in a publisher process of its own) reads its pod
and makes that Job the StragglerReport's owner. N jobs of R ranks, P ranks per pod, one
pod per node (N*R/P nodes), report every I seconds, phases spread evenly over I. After a
warm-up, one report in every K of each job has one rank below the policy's line
(persistence of one report, no warm-up, recovery after one report): it must be notified,
the ladder's first action, an Event on the report. Per slow report: t0 = when the
reporter's status PATCH reached the server, t1 = when the job's notify Event POST
reached it (both from the harness's request log, CLOCK_MONOTONIC). Controller CPU and RSS
come from /proc/<pid> every 10 s over the measured window; reconciles from the
controller's own metrics; API calls per reconcile from the request log.

The measured window opens once every job was reconciled once and, against the real
server (``--server real``), once the start-up backlog is gone: at most ``--workers`` due
jobs waiting (``pacekeeper_queue_depth``) twice in a row, 2 s apart. Started against
1,000 jobs already reporting, the controller's first minutes are a catch-up (each job's
first reconcile reads and writes its state); ``warmup_s`` says how long that took, and
the queue depth is sampled through the window.

Run: .venv/bin/python bench/controller_time_to_act.py --jobs 1000 --ranks 256 \
         --duration-s 600 [--workers 4] [--src DIR] [--label NAME]
`--src DIR` runs the controller and the reporters from another checkout (e.g. a `git
worktree` of the code before a change: a reporter and its controller share a report
schema); `--workers` is passed only when given (older code has no such flag).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests" / "k8s"))  # the harness

from _sources import pacekeeper_path  # noqa: E402
from _table import emit  # noqa: E402

POLICY = """
apiVersion: pacekeeper.dev/v1alpha1
kind: RemediationPolicies
mode: enforce
defaultPolicy: gpu
policies:
  gpu:
    score: {kind: gpuRelative}
    thresholds: {act: 0.75, recover: 0.9}
    persistence: {consecutiveReports: 1, minSamples: 1}
    warmup: {afterJobStartS: 0, afterActionS: 0}
    recovery: {consecutiveReports: 1, holdS: 0}
    ladder:
      notify: {enabled: true, timeoutS: 600}
"""
NAMESPACE = "default"
CONTROLLER_NS = "pk"
SAMPLE_S = 10.0
WARM_REPORTS = 2
"""Healthy reports every job sends before its first slow one."""


def job_name(i: int) -> str:
    return f"job-{i:04d}"


def node_name(job: int, k: int) -> str:
    return f"n-{job:04d}-{k:02d}"


# --- the publisher process: the jobs' reporters ------------------------------------------


def publish(cfg: dict[str, Any]) -> None:
    """Every job's rank 0 reporter, on a schedule: report k of job i at
    start + phase_i + k * interval; slow when k >= WARM_REPORTS and (k + i) % every == 0."""
    import kubernetes

    from pacekeeper.detector.reporters.kubernetes import KubernetesStatusSink
    from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

    jobs, ranks, rpp = cfg["jobs"], cfg["ranks"], cfg["ranks_per_pod"]
    interval, every, start = cfg["interval_s"], cfg["slow_every"], cfg["start"]
    if "token" in cfg:  # a real kube-apiserver
        conf = kubernetes.client.Configuration()
        conf.host, conf.ssl_ca_cert = cfg["url"], cfg["ca"]
        conf.api_key = {"authorization": cfg["token"]}
        conf.api_key_prefix = {"authorization": "Bearer"}
    else:
        from harness.clients import client_configuration  # the harness's (needs kmock)

        conf = client_configuration(cfg["url"])
    api = kubernetes.client.ApiClient(conf)
    sent_log = open(cfg["sent_log"], "a", buffering=1) if cfg.get("sent_log") else None  # noqa: SIM115
    api.configuration.connection_pool_maxsize = 16

    def base(i: int, slow: bool) -> ScoreReport:
        rows = [
            RankScores(rank=r, node=node_name(i, r // rpp), pod=f"{job_name(i)}-{r // rpp}",
                       gpu_relative=0.4 if slow and r == rpp + 1 else 0.99,
                       gpu_individual=0.98, section_samples=100, kernel_samples=1000)
            for r in range(ranks)
        ]  # fmt: skip
        return ScoreReport.build(
            job=JobIdentity(platform=Platform.KUBERNETES, namespace=NAMESPACE, name=job_name(i)),
            sequence=0, generated_at=datetime.now(UTC), window_s=interval, ranks=rows,
        )  # fmt: skip

    healthy = [base(i, False) for i in range(jobs)]
    slow = [base(i, True) for i in range(jobs)]
    sinks = [
        KubernetesStatusSink(namespace=NAMESPACE, name=job_name(i), incarnation="b",
                             api_client=api, pod_name=f"{job_name(i)}-0")
        for i in range(jobs)
    ]  # fmt: skip
    phase = [0.0 if cfg["aligned"] else interval * i / jobs for i in range(jobs)]
    lock = threading.Lock()
    nxt = [0] * jobs  # next report number per job

    def due(i: int) -> float:
        return start + phase[i] + nxt[i] * interval

    def worker(mine: list[int]) -> None:
        while True:
            i = min(mine, key=due)
            wait = due(i) - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            k = nxt[i]
            nxt[i] += 1
            is_slow = k >= WARM_REPORTS and (k + i) % every == 0
            rep = (slow if is_slow else healthy)[i].model_copy(
                update={"sequence": k, "generated_at": datetime.now(UTC)}
            )
            t_before = time.monotonic()
            try:
                sinks[i].send(rep)
            except Exception as e:  # the harness is busy: the next report comes anyway
                with lock:
                    print(f"publisher: {job_name(i)} seq {k}: {e!r}"[:300], file=sys.stderr)
                continue
            if sent_log is not None:
                line = f"{job_name(i)} {k} {int(is_slow)} {t_before:.6f} {time.monotonic():.6f}\n"
                with lock:
                    sent_log.write(line)

    threads = [
        threading.Thread(target=worker, args=(list(range(t, jobs, 8)),), daemon=True)
        for t in range(min(8, jobs))
    ]
    for t in threads:
        t.start()
    threading.Event().wait()


# --- the measurement ----------------------------------------------------------------------


def _proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _proc_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _metric(port: int, name: str) -> float:
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    except OSError:
        return float("nan")
    total = 0.0
    for line in text.decode().splitlines():
        m = re.match(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+-]+)$", line)
        if m:
            total += float(m.group(1))
    return total


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _source_env(src: Path | None, tmp: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if src is None:
        return env
    env["PYTHONPATH"] = pacekeeper_path(src, tmp / "src")
    return env


EVENT_LOG = 10_000_000
"""The harness's watch event log, in entries (its default is 10,000; see ``_trim``)."""
LOG_KEPT_WHOLE = 20_000
"""Newest log entries kept as they are; older ones of busy resources are slimmed."""
WATCHED_WHOLE = frozenset({"pods", "nodes"})


def _trim(server: Any, state: dict[str, int]) -> None:
    """On the harness's loop, to keep the harness a fair stand-in at this size:

    - one version per object (kmock keeps every one) and no raw request copies, or the
      harness grows by gigabytes in ten minutes;
    - the watch event log: the harness keeps one log for all resources, 10,000 entries,
      so at ~100 report and state writes a second the pods' and nodes' watches fall out of
      it within two minutes, get 410 on their next reconnect (every 60 s) and re-list
      32,000 objects each, a multi-second stall of the harness every minute. A real
      API server keeps a window per resource and sends bookmarks, so those watches never
      re-list. The bench gives the harness a log long enough for the run
      (``EVENT_LOG``) and slims the objects of old entries of other resources (only a
      watch resuming from that far back would read them: none does).
    """
    emulator = server.server
    for obj in emulator._objects.values():
        if len(obj.history) > 1:
            del obj.history[:-1]
    emulator._requests.clear()
    log = emulator._log
    upto = len(log) - LOG_KEPT_WHOLE
    for i in range(max(state.get("slimmed", 0), 0), max(upto, 0)):
        entry = log[i]
        if entry.key[0].plural in WATCHED_WHOLE:
            continue
        meta = entry.object.get("metadata") or {}
        stub = {k: meta.get(k) for k in ("name", "namespace", "uid", "resourceVersion")}
        log[i] = type(entry)(entry.rv, entry.key, entry.type, {"metadata": stub})
    state["slimmed"] = max(upto, state.get("slimmed", 0))


def _reconciled_count(server: Any) -> int:
    """On the harness's loop: reports that carry the controller's block."""
    emulator = server.server
    res = emulator.resource_for("pacekeeper.dev/v1alpha1", "StragglerReport")[0]
    return sum(
        1
        for key, obj in emulator._objects.items()
        if key[0] == res and not obj.deleted and "controller" in (obj.raw.get("status") or {})
    )


class Collector:
    """Drains the harness's request log every few seconds into what the figures need."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.slow_t0: dict[str, list[float]] = {}
        self.events: dict[str, list[float]] = {}
        self.calls: Counter[str] = Counter()
        self.reports = 0
        self.window = (float("inf"), float("inf"))
        self.trimmed: dict[str, int] = {}
        self.by_minute: dict[int, list[float]] = {}

    def drain(self) -> None:
        h = self.server.history
        with h._lock:
            records, h._records = h._records, []
        lo, hi = self.window
        for r in records:
            body = r.body if isinstance(r.body, dict) else {}
            status = body.get("status") or {}
            if r.plural == "stragglerreports" and r.subresource == "status" and "report" in status:
                # The reporter's patch (the controller's carries only its own block).
                if lo <= r.at < hi:
                    self.reports += 1
                if (status.get("stragglers") or 0) > 0:
                    self.slow_t0.setdefault(str(r.name), []).append(r.at)
                continue
            if r.plural == "events" and r.method == "POST" and r.status == 201:
                job = (body.get("involvedObject") or {}).get("name")
                self.events.setdefault(str(job), []).append(r.at)
            if lo <= r.at < hi and r.verb != "watch":
                sub = f"/{r.subresource}" if r.subresource else ""
                self.calls[f"{r.verb} {r.plural}{sub}"] += 1
        self.server.call(_trim, self.server, self.trimmed)

    def latencies(self) -> tuple[list[float], int]:
        return latencies(self.slow_t0, self.events, self.window, self.by_minute)


def latencies(
    slow_t0: dict[str, list[float]], events: dict[str, list[float]],
    window: tuple[float, float], by_minute: dict[int, list[float]],
) -> tuple[list[float], int]:  # fmt: skip
    """Per slow report in the window, t1 - t0: the job's first Event after it and before
    its next slow report. Returns (latencies, slow reports never acted on)."""
    lo, hi = window
    out, missed = [], 0
    for job, t0s in slow_t0.items():
        evs = sorted(events.get(job, []))
        for n, t0 in enumerate(t0s):
            if not lo <= t0 < hi:
                continue
            until = t0s[n + 1] if n + 1 < len(t0s) else float("inf")
            t1 = next((e for e in evs if t0 <= e < until), None)
            if t1 is None:
                missed += 1
            else:
                out.append(t1 - t0)
                by_minute.setdefault(int((t0 - lo) // 60), []).append(t1 - t0)
    return sorted(out), missed


def run(args: argparse.Namespace) -> dict[str, Any]:
    from harness import start_server
    from harness.objects import node, pod
    from reporter_helpers import CRD_PATH
    from test_operator_process import kubeconfig

    jobs, ranks, rpp = args.jobs, args.ranks, args.ranks_per_pod
    pods_per_job = ranks // rpp
    with start_server(event_log_size=EVENT_LOG) as server, tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        logs = args.save_logs or tmp
        logs.mkdir(parents=True, exist_ok=True)
        server.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        server.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CONTROLLER_NS}})
        server.apply_yaml(CRD_PATH)

        def world(i: int) -> None:  # one job per call: the harness answers calls in 10 s
            owner = {"kind": "Job", "name": job_name(i), "uid": f"uid-job-{i:04d}"}
            for k in range(pods_per_job):
                server.server.apply(node(node_name(i, k)))
                server.server.apply(
                    pod(f"{job_name(i)}-{k}", node_name=node_name(i, k),
                        labels={"batch.kubernetes.io/job-name": job_name(i),
                                "batch.kubernetes.io/job-completion-index": str(k)},
                        annotations={"pacekeeper.dev/detect": "true"}, owner=owner)
                )  # fmt: skip

        t = time.monotonic()
        for i in range(jobs):
            server.call(world, i)
        setup_s = time.monotonic() - t
        server.history.clear()
        policy = tmp / "policy.yaml"
        policy.write_text(POLICY)
        kc = kubeconfig(server.url, tmp / "kubeconfig")
        env = _source_env(args.src, tmp)
        where = subprocess.run(
            [sys.executable, "-c", "import pacekeeper.controller as c; print(c.__file__)"],
            env=env, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        port = _free_port()
        cmd = [
            sys.executable, "-m", "pacekeeper.controller.cli", "operator", "run",
            "--policy", str(policy), "--kubeconfig", str(kc), "--namespace", CONTROLLER_NS,
            "--identity", "bench", "--log-level", args.log_level, "--metrics-port", str(port),
            # The harness answers a LIST of 32,000 pods after seconds (a real server serves
            # it from its watch cache); the Lease's 2 s timeouts and 10 s renew deadline
            # would then hand leadership to nobody. One replica needs no election.
            "--no-leader-election",
        ]  # fmt: skip
        if args.workers is not None:
            cmd += ["--workers", str(args.workers)]
        log = logs / f"{args.label}-controller.log"
        proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)
        cfg = {
            "url": server.url, "jobs": jobs, "ranks": ranks, "ranks_per_pod": rpp,
            "interval_s": args.interval_s, "slow_every": args.slow_every,
            "aligned": args.aligned, "start": time.monotonic() + 5.0,
        }  # fmt: skip
        publisher = subprocess.Popen(
            [sys.executable, __file__, "--publish", json.dumps(cfg)],
            env=env, stderr=(logs / f"{args.label}-pub.log").open("wb"),  # the controller's code
        )  # fmt: skip
        collector = Collector(server)
        samples: list[dict[str, float]] = []
        try:
            # Every job reconciled once on healthy data first (or the warm-up runs out).
            t = time.monotonic()
            deadline = t + args.warmup_timeout_s

            def reconciled() -> int:
                return int(server.call(_reconciled_count, server))

            done = 0
            while time.monotonic() < deadline and done < jobs:
                time.sleep(2.0)
                collector.drain()
                done = reconciled()
                if proc.poll() is not None:
                    raise RuntimeError(f"the controller exited with {proc.returncode}")
            warm_s = time.monotonic() - t
            lo = time.monotonic()
            hi = lo + args.duration_s
            collector.window = (lo, hi)
            cpu0, m0 = _proc_cpu_s(proc.pid), _metric(port, "pacekeeper_reconcile_seconds_count")
            s0 = _metric(port, "pacekeeper_reconcile_seconds_sum")
            hcpu0, pcpu0 = _proc_cpu_s(os.getpid()), _proc_cpu_s(publisher.pid)
            next_sample = lo
            while time.monotonic() < hi:
                now = time.monotonic()
                if now >= next_sample:
                    samples.append({"t_s": round(now - lo, 1), "rss_mb": _proc_rss_mb(proc.pid),
                                    "cpu_s": _proc_cpu_s(proc.pid)})  # fmt: skip
                    next_sample += SAMPLE_S
                time.sleep(min(2.0, max(0.0, next_sample - time.monotonic())))
                collector.drain()
                if proc.poll() is not None:
                    raise RuntimeError(f"the controller exited with {proc.returncode}")
            wall = time.monotonic() - lo
            cpu = _proc_cpu_s(proc.pid) - cpu0
            reconciles = _metric(port, "pacekeeper_reconcile_seconds_count") - m0
            rec_s = _metric(port, "pacekeeper_reconcile_seconds_sum") - s0
            hcpu = _proc_cpu_s(os.getpid()) - hcpu0
            pcpu = _proc_cpu_s(publisher.pid) - pcpu0
            samples.append({"t_s": round(wall, 1), "rss_mb": _proc_rss_mb(proc.pid),
                            "cpu_s": _proc_cpu_s(proc.pid)})  # fmt: skip
            time.sleep(min(10.0, args.interval_s))  # let the last slow reports be acted on
            collector.drain()
        except BaseException:
            print(log.read_text()[-3000:], file=sys.stderr)
            raise
        finally:
            publisher.kill()
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        errors = (logs / f"{args.label}-pub.log").read_text().count("publisher:")
    lat, missed = collector.latencies()
    return figures(
        args, lat=lat, missed=missed, by_minute=collector.by_minute, samples=samples,
        wall=wall, cpu=cpu, reconciles=reconciles, rec_s=rec_s, calls=collector.calls,
        reports=collector.reports, cores={"harness cores": hcpu / wall},
        extra={"publisher_cpu_cores": pcpu / wall, "controller_module": where,
               "command": " ".join(cmd), "setup_s": round(setup_s, 1),
               "warmup_s": round(warm_s, 1), "reconciled_before_window": done,
               "publisher_errors": errors},
    )  # fmt: skip


def run_real(args: argparse.Namespace) -> dict[str, Any]:
    """The same load against a real kube-apiserver (bench/_real_world.py says how)."""
    import _real_world as rw

    jobs, ranks, rpp = args.jobs, args.ranks, args.ranks_per_pod
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        logs = args.save_logs or tmp
        logs.mkdir(parents=True, exist_ok=True)
        cluster = rw.start(tmp)
        publisher: subprocess.Popen[bytes] | None = None
        operator = watch = None
        try:
            setup_s = rw.build(
                cluster, NAMESPACE, jobs=jobs, pods_per_job=ranks // rpp,
                job_name=job_name, node_name=node_name,
            )  # fmt: skip
            calls = rw.AuditCalls(cluster)
            watch = rw.EventWatch(cluster, NAMESPACE).start()
            operator = rw.start_operator(cluster, POLICY, logs / "operator", args.workers)
            proc, port = operator.process, operator.metrics_port
            sent = rw.SendLog(logs / f"{args.label}-sent.log")
            cfg = {
                **rw.publisher_config(cluster), "sent_log": str(sent.path), "jobs": jobs,
                "ranks": ranks, "ranks_per_pod": rpp, "interval_s": args.interval_s,
                "slow_every": args.slow_every, "aligned": args.aligned,
                "start": time.monotonic() + 5.0,
            }  # fmt: skip
            publisher = subprocess.Popen(
                [sys.executable, __file__, "--publish", json.dumps(cfg)],
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                stderr=(logs / f"{args.label}-pub.log").open("wb"),
            )  # fmt: skip

            def drain() -> None:
                calls.drain()
                sent.drain()
                proc.check_running()

            t = time.monotonic()
            deadline = t + args.warmup_timeout_s
            while time.monotonic() < deadline and len(calls.reconciled) < jobs:
                time.sleep(2.0)
                drain()
            done = len(calls.reconciled)
            # Then until the start-up backlog is gone (every job's first reconcile costs
            # more, while 33 reports a second keep coming): no more due jobs waiting than
            # there are workers, twice in a row. A controller without the gauge reads 0.
            calm = 0
            while time.monotonic() < deadline and calm < 2:
                depth = _metric(port, "pacekeeper_queue_depth")
                calm = calm + 1 if depth <= (args.workers or 1) else 0
                time.sleep(2.0)
                drain()
            warm_s = time.monotonic() - t
            servers = rw.server_pids(cluster)
            lo = time.monotonic()
            hi = lo + args.duration_s
            calls.counting = True
            cpu0, m0 = _proc_cpu_s(proc.pid), _metric(port, "pacekeeper_reconcile_seconds_count")
            s0 = _metric(port, "pacekeeper_reconcile_seconds_sum")
            watched = {**servers, "publisher": publisher.pid}
            others0 = {n: _proc_cpu_s(p) for n, p in watched.items()}
            samples: list[dict[str, float]] = []
            next_sample = lo
            while time.monotonic() < hi:
                now = time.monotonic()
                if now >= next_sample:
                    sample = {"t_s": round(now - lo, 1), "rss_mb": _proc_rss_mb(proc.pid),
                              "cpu_s": _proc_cpu_s(proc.pid),
                              "queue_depth": _metric(port, "pacekeeper_queue_depth")}  # fmt: skip
                    sample.update({f"{n}_rss_mb": _proc_rss_mb(p) for n, p in servers.items()})
                    samples.append(sample)
                    next_sample += SAMPLE_S
                time.sleep(min(2.0, max(0.0, next_sample - time.monotonic())))
                drain()
            wall = time.monotonic() - lo
            calls.drain()
            calls.counting = False
            cpu = _proc_cpu_s(proc.pid) - cpu0
            reconciles = _metric(port, "pacekeeper_reconcile_seconds_count") - m0
            rec_s = _metric(port, "pacekeeper_reconcile_seconds_sum") - s0
            others = {n: (_proc_cpu_s(p) - others0[n]) / wall for n, p in watched.items()}
            samples.append({"t_s": round(wall, 1), "rss_mb": _proc_rss_mb(proc.pid),
                            "cpu_s": _proc_cpu_s(proc.pid)})  # fmt: skip
            time.sleep(min(10.0, args.interval_s))  # let the last slow reports be acted on
            drain()
            container = operator.release.container
            command = " ".join([*container["command"], *(container.get("args") or [])])
        except BaseException:
            if operator is not None:
                print(operator.tail(3000), file=sys.stderr)
            raise
        finally:
            if publisher is not None:
                publisher.kill()
            if watch is not None:
                watch.stop()
            if operator is not None:
                operator.close()
            cluster.close()
        errors = (logs / f"{args.label}-pub.log").read_text().count("publisher:")
    by_minute: dict[int, list[float]] = {}
    lat, missed = latencies(sent.slow_t0, watch.snapshot(), (lo, hi), by_minute)
    return figures(
        args, lat=lat, missed=missed, by_minute=by_minute, samples=samples, wall=wall,
        cpu=cpu, reconciles=reconciles, rec_s=rec_s, calls=calls.calls,
        reports=sum(1 for t in sent.sent if lo <= t < hi),
        cores={"apiserver+etcd cores": others.get("kube-apiserver", 0) + others.get("etcd", 0)},
        extra={"server_cores": others, "command": command, "setup_s": round(setup_s, 1),
               "warmup_s": round(warm_s, 1), "reconciled_before_window": done,
               "publisher_errors": errors, "forbidden": calls.denied,
               "event_watch_restarts": watch.restarts},
    )  # fmt: skip


def figures(
    args: argparse.Namespace, *, lat: list[float], missed: int,
    by_minute: dict[int, list[float]], samples: list[dict[str, float]], wall: float,
    cpu: float, reconciles: float, rec_s: float, calls: Counter[str], reports: int,
    cores: dict[str, float], extra: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """The table's row and the JSON's detail, the same for both servers."""
    jobs, ranks = args.jobs, args.ranks
    pods_per_job = ranks // args.ranks_per_pod
    q = statistics.quantiles(lat, n=100, method="inclusive") if len(lat) > 1 else lat * 99
    rss = [s["rss_mb"] for s in samples]
    half = len(rss) // 2
    per = max(reconciles, 1.0)
    per_call = {k: round(v / per, 2) for k, v in calls.most_common() if v / per >= 0.01}
    row = {
        "label": args.label,
        "server": args.server,
        "jobs": jobs,
        "ranks": ranks,
        "nodes": jobs * pods_per_job,
        "every s": args.interval_s,
        "window s": round(wall),
        "slow": len(lat) + missed,
        "acted": len(lat),
        "p50 ms": 1000 * statistics.median(lat) if lat else float("nan"),
        "p99 ms": 1000 * q[98] if lat else float("nan"),
        "max ms": 1000 * lat[-1] if lat else float("nan"),
        "cpu cores": cpu / wall,
        "rec/s": reconciles / wall,
        "cpu ms/rec": 1000 * cpu / per,
        "rss MB first": rss[0],
        "last": rss[-1],
        "max": max(rss),
        **cores,
    }
    detail = {
        "label": args.label,
        "server": args.server,
        "workers": args.workers,
        "reports": reports,
        "reconcile_ms_mean": 1000 * rec_s / per,
        "rss_2nd_half_growth_mb": rss[-1] - rss[half],
        **extra,
        "api_calls_per_reconcile": per_call,
        "max_ms_by_minute": {m: round(1000 * max(v)) for m, v in sorted(by_minute.items())},
        "p99_ms_by_minute": {
            m: round(
                1000
                * (statistics.quantiles(v, n=100, method="inclusive")[98] if len(v) > 1 else v[0])
            )
            for m, v in sorted(by_minute.items())
        },
        "rss_samples": samples,
    }
    return {"row": row, "detail": detail}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--publish", help=argparse.SUPPRESS)
    ap.add_argument(
        "--server",
        choices=("harness", "real"),
        default="harness",
        help="the API harness, or a real kube-apiserver (tests/realserver's build)",
    )
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--ranks", type=int, default=256)
    ap.add_argument("--ranks-per-pod", type=int, default=8)
    ap.add_argument("--interval-s", type=float, default=30.0)
    ap.add_argument("--slow-every", type=int, default=5, help="one slow report in K")
    ap.add_argument("--aligned", action="store_true", help="every job reports at once")
    ap.add_argument("--duration-s", type=float, default=600.0)
    ap.add_argument("--warmup-timeout-s", type=float, default=600.0)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--src", type=Path, default=None, help="run the controller from here")
    ap.add_argument("--log-level", default="info")
    ap.add_argument("--label", default="")
    ap.add_argument("--save-logs", type=Path, default=None, help="keep the processes' logs here")
    ap.add_argument("--name", default="controller_time_to_act", help="results file name")
    ap.add_argument(
        "--save-chart",
        type=Path,
        default=None,
        help="only render the chart for --server real's values into this JSON file (for a "
        "machine without Helm's library: PACEKEEPER_CHART_RENDERED=FILE there)",
    )
    args = ap.parse_args()
    if args.publish:
        publish(json.loads(args.publish))
        return
    if args.save_chart is not None:
        import _real_world as rw

        rw.save_chart_rendering(POLICY, args.workers, args.save_chart)
        return
    out = run_real(args) if args.server == "real" else run(args)
    path = ROOT / "bench" / "results" / f"{args.name}.json"
    rows, details = [out["row"]], [out["detail"]]
    prev = json.loads(path.read_text()) if path.exists() else {}
    if len(prev.get("meta", {}).get("details", [])) == len(prev.get("rows", [])):
        # One row per label: the code before and after a change, side by side.
        keep = [i for i, r in enumerate(prev.get("rows", [])) if r.get("label") != args.label]
        rows = [prev["rows"][i] for i in keep] + rows
        details = [prev["meta"]["details"][i] for i in keep] + details
    emit(
        args.name,
        rows,
        title="Status update -> first action (real operator process vs API harness, steady load)",
        meta={"method": __doc__.split("\n\n")[1] if __doc__ else "", "details": details},
    )


if __name__ == "__main__":
    main()
