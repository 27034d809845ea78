"""The chart's values as pydantic models: what values.yaml may hold, key by key.

``values_schema.py`` turns them into values.schema.json, which Helm checks every install
and upgrade against. The ``policy`` key is the controller's own models
(``pacekeeper.controller.core.policy``), so the chart and the controller cannot disagree
about what a valid policy is. Validators here are the cross-field rules; the generator
restates each as JSON schema, and tests/chart checks that both refuse the same values.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel, to_snake

from pacekeeper.controller.core.policy import (
    API_VERSION,
    KIND,
    PolicyDocument,
    parse_policy_document,
)

Mode = Literal["observe", "dry-run", "enforce"]
PullPolicy = Literal["Always", "IfNotPresent", "Never"]
# Kubernetes resource quantities: "500m", "0.5", "128Mi", "1Gi", 2.
Quantity = (
    Annotated[
        str,
        Field(pattern=r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+|[numkMGTPE]i?|Ki)?$"),
    ]
    | Annotated[int, Field(ge=0)]
    | Annotated[float, Field(ge=0)]
)
DnsLabel = Annotated[
    str, Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
]
StringMap = dict[str, str]


class _Values(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class Image(_Values):
    repository: str = Field(default="localhost/pacekeeper-controller", min_length=1)
    tag: str = Field(default="", description="Image tag. Empty: the chart's appVersion.")
    digest: str = Field(default="", pattern=r"^(sha256:[0-9a-f]{64})?$")
    pull_policy: PullPolicy = "IfNotPresent"


class ResourceList(_Values):
    cpu: Quantity | None = None
    memory: Quantity | None = None
    ephemeral_storage: Quantity | None = Field(default=None, alias="ephemeral-storage")


class Resources(_Values):
    """Requests are required: an unrequested controller is the first pod evicted."""

    requests: ResourceList
    limits: ResourceList | None = None


class LeaderElection(_Values):
    enabled: bool = Field(default=True, description="Elect one active replica through a Lease.")


class Logging(_Values):
    format: Literal["json", "text"] = "json"
    level: Literal["debug", "info", "warning", "error"] = "info"


class Controller(_Values):
    replicas: int = Field(
        default=1, ge=1, description="Controller pods; > 1 needs leader election."
    )
    image: Image = Image()
    image_pull_secrets: list[dict[str, str]] = []
    resources: Resources
    security_context: dict[str, Any] = Field(description="Container securityContext.")
    pod_security_context: dict[str, Any] = Field(description="Pod securityContext.")
    leader_election: LeaderElection = LeaderElection()
    logging: Logging = Logging()
    workers: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="Reconciles in flight at once, never two of one job; null: the "
        "controller's default (4).",
    )
    pod_annotations: StringMap = {}
    pod_labels: StringMap = {}
    priority_class_name: str = ""
    node_selector: StringMap = {}
    tolerations: list[dict[str, Any]] = []
    affinity: dict[str, Any] = {}

    @model_validator(mode="after")
    def _replicas_need_leader_election(self) -> Self:
        if self.replicas > 1 and not self.leader_election.enabled:
            raise ValueError(
                f"controller.replicas={self.replicas} needs controller.leaderElection.enabled="
                "true: two active controllers would act twice"
            )
        return self


class Toggle(_Values):
    enabled: bool


class Actions(_Values):
    notify: Toggle = Toggle(enabled=True)
    restart_rank: Toggle = Toggle(enabled=False)
    taint_node: Toggle = Toggle(enabled=False)
    cordon_node: Toggle = Toggle(enabled=False)
    drain_node: Toggle = Toggle(enabled=False)


class ServiceAccount(_Values):
    create: bool = True
    name: str = Field(default="", max_length=253)
    annotations: StringMap = {}

    @model_validator(mode="after")
    def _existing_needs_name(self) -> Self:
        if not self.create and not self.name:
            raise ValueError("serviceAccount.name is required when serviceAccount.create=false")
        return self


class SecretKeyRef(_Values):
    name: str = Field(default="", max_length=253)
    key: str = Field(default="token", min_length=1)


class ServiceMonitor(_Values):
    enabled: bool = False
    interval: str = Field(default="30s", pattern=r"^([0-9]+(ms|s|m|h|d|w|y))+$")
    bearer_token_secret: SecretKeyRef = SecretKeyRef()
    labels: StringMap = {}


class PrometheusRule(_Values):
    enabled: bool = False
    labels: StringMap = {}


class GrafanaDashboard(_Values):
    enabled: bool = False
    labels: StringMap = {"grafana_dashboard": "1"}
    namespace: str = Field(default="", max_length=63)


class MetricsNetworkPolicy(_Values):
    enabled: bool = False
    from_: list[dict[str, Any]] = Field(default=[], alias="from")


MetricsAccess = Literal["kubernetes", "localhost", "open"]


class Scraper(_Values):
    namespace: DnsLabel
    service_account: DnsSubdomain


class Metrics(_Values):
    enabled: bool = True
    port: int = Field(default=8080, ge=1024, le=65535)
    access: MetricsAccess = "kubernetes"
    scrapers: list[Scraper] = []
    service_monitor: ServiceMonitor = ServiceMonitor()
    prometheus_rule: PrometheusRule = PrometheusRule()
    network_policy: MetricsNetworkPolicy = MetricsNetworkPolicy()
    grafana_dashboard: GrafanaDashboard = GrafanaDashboard()

    @model_validator(mode="after")
    def _monitoring_needs_metrics(self) -> Self:
        if not self.enabled:
            for key, part in (
                ("serviceMonitor", self.service_monitor),
                ("prometheusRule", self.prometheus_rule),
                ("networkPolicy", self.network_policy),
                ("grafanaDashboard", self.grafana_dashboard),
            ):
                if part.enabled:
                    raise ValueError(f"metrics.{key}.enabled=true needs metrics.enabled=true")
        if self.access == "localhost" and self.service_monitor.enabled:
            raise ValueError(
                "metrics.serviceMonitor.enabled=true needs metrics.access kubernetes or open: "
                "with localhost no Service reaches /metrics"
            )
        if self.access != "kubernetes" and self.scrapers:
            raise ValueError(
                f"metrics.scrapers is set while metrics.access={self.access}: only kubernetes "
                "checks who scrapes"
            )
        return self


GoDuration = Annotated[str, Field(pattern=r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$")]


class HelmTls(_Values):
    # Bounded so that renewal always comes before expiry (JSON schema cannot compare keys).
    validity_days: int = Field(default=365, ge=90, le=3650)
    renew_before_days: int = Field(default=30, ge=1, le=60)


class IssuerRef(_Values):
    kind: Literal["Issuer", "ClusterIssuer"] = "Issuer"
    name: str = Field(default="", max_length=253)


class CertManagerTls(_Values):
    issuer_ref: IssuerRef = IssuerRef()
    duration: GoDuration = "2160h"
    renew_before: GoDuration = "720h"


class SecretTls(_Values):
    name: str = Field(default="", max_length=253)
    ca_bundle: str = Field(default="", pattern=r"^[A-Za-z0-9+/]*={0,2}$")


class Tls(_Values):
    source: Literal["helm", "certManager", "secret"] = "helm"
    helm: HelmTls = HelmTls()
    cert_manager: CertManagerTls = CertManagerTls()
    secret: SecretTls = SecretTls()

    @model_validator(mode="after")
    def _secret_needs_a_name(self) -> Self:
        if self.source == "secret" and not self.secret.name:
            raise ValueError("tls.secret.name is required when tls.source=secret")
        return self


class LabelSelectorRequirement(_Values):
    key: str = Field(min_length=1, max_length=317)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = []


class LabelSelector(_Values):
    match_labels: StringMap = {}
    match_expressions: list[LabelSelectorRequirement] = []


class Webhook(_Values):
    enabled: bool = False
    replicas: int = Field(default=2, ge=1)
    port: int = Field(default=9443, ge=1024, le=65535)
    failure_policy: Literal["Ignore", "Fail"] = "Ignore"
    timeout_seconds: int = Field(default=3, ge=1, le=30)
    namespace_selector: LabelSelector = LabelSelector()
    object_selector: LabelSelector = LabelSelector()
    resources: Resources = Resources(requests=ResourceList(cpu="10m", memory="64Mi"))
    pod_annotations: StringMap = {}
    node_selector: StringMap = {}
    tolerations: list[dict[str, Any]] = []
    affinity: dict[str, Any] = {}


class PodDisruptionBudget(_Values):
    enabled: bool = False
    min_available: Annotated[int, Field(ge=0)] | Annotated[str, Field(pattern=r"^[0-9]{1,3}%$")] = 1


DnsSubdomain = Annotated[
    str,
    Field(
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    ),
]


class ReporterBinding(_Values):
    """The training pods of one ServiceAccount: what they may report into."""

    namespace: DnsLabel
    service_account: DnsSubdomain
    """The ServiceAccount the job's pods run as; give each job (or team) its own, since
    RBAC cannot tell two jobs of one ServiceAccount apart."""
    reports: list[DnsSubdomain] = []
    """StragglerReports (one per job, named after it) whose status these pods may patch;
    empty: every report of the namespace."""


class ReporterRbac(_Values):
    enabled: bool = False
    bindings: list[ReporterBinding] = []

    @model_validator(mode="after")
    def _enabled_needs_bindings(self) -> Self:
        if self.enabled and not self.bindings:
            raise ValueError("reporterRbac.bindings is empty while reporterRbac.enabled=true")
        seen: set[tuple[str, str]] = set()
        for i, b in enumerate(self.bindings):
            key = (b.namespace, b.service_account)
            if key in seen:
                raise ValueError(
                    f"reporterRbac.bindings[{i}]: serviceAccount {b.service_account!r} in "
                    f"namespace {b.namespace!r} is listed twice"
                )
            seen.add(key)
        return self


class PolicyValidation(_Values):
    enabled: bool = True
    timeout_s: int = Field(default=300, ge=10, le=3600)


class State(_Values):
    namespace: str = Field(
        default="", max_length=63, pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$",
        description="Namespace of the state ConfigMaps. Empty: <release namespace>-state.",
    )  # fmt: skip
    create_namespace: bool = True
    migrate: bool = True


class TestImage(_Values):
    repository: str = Field(default="busybox", min_length=1)
    tag: str = Field(default="1.37", min_length=1)
    pull_policy: PullPolicy = "IfNotPresent"


class Tests(_Values):
    image: TestImage = TestImage()


class ChartValues(_Values):
    """Top level of values.yaml."""

    mode: Mode = Field(default="observe", description="observe | dry-run | enforce.")
    name_override: str = Field(default="", max_length=40)
    fullname_override: str = Field(default="", max_length=52)
    controller: Controller
    policy: dict[str, Any] = Field(
        default_factory=dict, description="Policy document body; its schema is the controller's."
    )
    policy_validation: PolicyValidation = PolicyValidation()
    actions: Actions = Actions()
    service_account: ServiceAccount = ServiceAccount()
    metrics: Metrics = Metrics()
    tls: Tls = Tls()
    webhook: Webhook = Webhook()
    pod_disruption_budget: PodDisruptionBudget = PodDisruptionBudget()
    reporter_rbac: ReporterRbac = ReporterRbac()
    state: State = State()
    tests: Tests = Tests()
    # Parent charts pass `global` to every subchart.
    global_: dict[str, Any] | None = Field(default=None, alias="global")

    def policy_document(self) -> PolicyDocument:
        """The document the chart renders into the policy ConfigMap, validated."""
        owned = sorted(CHART_OWNED_POLICY_KEYS & set(self.policy))
        if owned:
            raise ValueError(
                f"policy.{owned[0]} is set by the chart (use the top-level value instead)"
            )
        data = {**self.policy, "apiVersion": API_VERSION, "kind": KIND, "mode": self.mode}
        return parse_policy_document(data, "values.policy")

    @model_validator(mode="after")
    def _webhook_from_a_secret_needs_its_ca(self) -> Self:
        if self.webhook.enabled and self.tls.source == "secret" and not self.tls.secret.ca_bundle:
            raise ValueError(
                "tls.secret.caBundle is required when webhook.enabled=true and "
                "tls.source=secret: the apiserver must trust the webhook's certificate"
            )
        return self

    @model_validator(mode="after")
    def _policy_within_granted_actions(self) -> Self:
        document = self.policy_document()
        if self.mode != "enforce":
            return self
        granted = {name for name, toggle in self.actions if toggle.enabled}
        for name, policy in document.policies.items():
            if policy.mode is not None and policy.mode.value != "enforce":
                continue
            for step in policy.ladder.enabled_steps():
                if to_snake(step.value) not in granted:
                    raise ValueError(
                        f"policy.policies.{name}.ladder.{step.value}.enabled=true in enforce "
                        f"mode needs actions.{step.value}.enabled=true (its RBAC)"
                    )
        return self


CHART_OWNED_POLICY_KEYS = frozenset({"apiVersion", "kind", "mode"})
"""The policy document's keys the chart writes itself (from the top-level ``mode``)."""
