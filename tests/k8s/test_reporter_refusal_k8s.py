"""A status the API server refuses (422): the printed line names the object, the HTTP
status and the server's own message, not just 'refused'."""

from __future__ import annotations

import logging

import pytest
from harness import Fault, RunningServer, client_configuration
from reporter_helpers import CRD_PATH

from pacekeeper.controller.runtime.report_birth import born_object
from pacekeeper.controller.simulation.synthetic import synthetic_report
from pacekeeper.controller.sources.workloads import OwnerRef
from pacekeeper.detector.reporters import Backoff, Publisher
from pacekeeper.detector.reporters.k8s_status import PLURAL
from pacekeeper.detector.reporters.kubernetes import KubernetesStatusSink
from pacekeeper.detector.score_report import JobIdentity, Platform


def test_422_on_status_is_printed_with_object_status_and_api_message(
    k8s_server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    import kubernetes

    k8s_server.apply_yaml(CRD_PATH)
    # The report as the controller creates it (the reporter never does).
    k8s_server.apply(born_object("default", "llm", OwnerRef("batch/v1", "Job", "llm", "default",
                                                             uid="uid-llm")))  # fmt: skip
    k8s_server.inject(
        Fault(
            status=422,
            reason="Invalid",
            message='StragglerReport.pacekeeper.dev "llm" is invalid: status.worstScore: '
            "Invalid value: -1",
            times=3,
            verb="patch",
            subresource="status",
        )
    )
    sink = KubernetesStatusSink(
        namespace="default",
        name="llm",
        incarnation="i",
        api_client=kubernetes.client.ApiClient(client_configuration(k8s_server.url)),
    )
    pub = Publisher(sink, backoff=Backoff(base_s=0.01, max_s=0.05))
    job = JobIdentity(platform=Platform.KUBERNETES, namespace="default", name="llm")
    with caplog.at_level(logging.INFO, logger="pacekeeper.detector.reporters"):
        for seq in range(3):
            pub.submit(synthetic_report(job=job, sequence=seq))
        assert pub.flush(timeout_s=20)
    pub.close()
    assert pub.stats().rejected == 3
    refused = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(refused) == 1  # the other two are counted, printed with the next line
    (line,) = refused
    assert "StragglerReport default/llm status refused: HTTP 422" in line
    assert "status.worstScore: Invalid value: -1" in line
    assert k8s_server.history.find(verb="patch", plural=PLURAL)
