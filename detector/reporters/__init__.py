"""Publishing score reports out of the job: Ray ScoreBoard, Kubernetes StragglerReport.

``make_publisher`` builds the configured transport behind a non-blocking ``Publisher``;
``attach_reporter`` registers it as a report listener on the Detector. Neither imports
ray or kubernetes until a report is sent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from .backoff import Backoff
from .options import ReporterKind, ReporterOptions
from .publisher import Publisher, PublisherStats, Sink

__all__ = [
    "Backoff",
    "Publisher",
    "PublisherStats",
    "ReporterKind",
    "ReporterOptions",
    "Sink",
    "attach_reporter",
    "install_reporter",
    "make_publisher",
    "make_sink",
    "uninstall_reporter",
]

logger = logging.getLogger(__name__)


def make_sink(options: ReporterOptions, kind: ReporterKind, *, api_client: Any = None) -> Sink:
    assert options.incarnation is not None  # resolve() always sets it
    if kind is ReporterKind.RAY:
        from .ray_scoreboard import RayScoreBoardSink

        return RayScoreBoardSink(
            job=None,  # bound to the first report's job (the Detector's identity)
            incarnation=options.incarnation,
            address=options.ray_address,
            timeout_s=options.timeout_s,
        )
    if kind is ReporterKind.KUBERNETES:
        from ..env import pod_name
        from .kubernetes import KubernetesStatusSink

        namespace, name = options.stragglerreport()
        return KubernetesStatusSink(
            namespace=namespace,
            name=name,
            incarnation=options.incarnation,
            api_client=api_client,
            threshold=options.straggler_threshold,
            read_timeout_s=options.timeout_s,
            pod_name=pod_name(),
        )
    raise ValueError(f"reporter kind {kind.value!r} has no sink")


def make_publisher(
    options: ReporterOptions | Mapping[str, Any] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    api_client: Any = None,
    backoff: Backoff | None = None,
) -> Publisher | None:
    """The configured publisher, or None when reporting is off (``none``, or ``auto``
    finding no platform)."""
    if not isinstance(options, ReporterOptions):
        options = ReporterOptions.resolve(options, env)
    kind = options.effective_kind(env)
    if kind is ReporterKind.NONE:
        if options.kind is ReporterKind.AUTO:
            # Asked to report but finding nowhere to: training goes on, so this one line
            # at initialize is all that tells anyone the controller will see nothing.
            hint = options.nowhere_hint(env)
            logger.warning(
                "score reporter 'auto' found no destination, reports go nowhere: %s",
                hint,
                extra={"sink": "none", "hint": hint},
            )
        return None
    try:
        sink = make_sink(options, kind, api_client=api_client)
    except ImportError as e:
        if options.kind is ReporterKind.AUTO:  # guessed, not asked for: degrade
            logger.warning(
                "score reporter disabled, client library missing",
                extra={"sink": kind.value, "error": str(e)},
            )
            return None
        extra = "ray" if kind is ReporterKind.RAY else "kubernetes"
        raise ValueError(
            f"reporter {kind.value!r} needs the {extra!r} package: "
            f"pip install 'pacekeeper[{extra}]' ({e})"
        ) from e
    logger.info(
        "score reporter configured",
        extra={"sink": sink.name, "incarnation": options.incarnation},
    )
    return Publisher(sink, max_queue=options.max_queue, backoff=backoff)


def attach_reporter(
    add_listener: Callable[[Callable[[Any], None]], Any],
    options: ReporterOptions | Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Publisher | None:
    """Build the publisher and register it with ``add_listener`` (e.g.
    ``Detector.add_report_listener``); returns it so shutdown can ``close()`` it."""
    publisher = make_publisher(options, **kwargs)
    if publisher is not None:
        add_listener(publisher.submit)
    return publisher


def install_reporter(
    detector: Any, reporter: ReporterOptions | Mapping[str, Any] | str | None = None
) -> Publisher | None:
    """What ``Detector.initialize`` calls: ``reporter`` is a kind (``"ray"``,
    ``"kubernetes"``, ``"none"``, ``"auto"``), a mapping of ``ReporterOptions`` fields, or
    None to read everything from the environment. Bad configuration raises ValueError
    naming the option or variable; nothing later raises into training."""
    if isinstance(reporter, str):
        reporter = {"kind": reporter}
    return attach_reporter(detector.add_report_listener, reporter)


def uninstall_reporter(detector: Any, publisher: Publisher | None, timeout_s: float = 2.0) -> None:
    """What ``Detector.shutdown`` calls: stop listening, deliver what is queued within
    ``timeout_s``, stop the thread. Never raises."""
    if publisher is None:
        return
    try:
        detector.remove_report_listener(publisher.submit)
        publisher.close(timeout_s=timeout_s)
    except Exception:
        logger.exception("score reporter shutdown failed", extra={"sink": publisher.sink.name})
