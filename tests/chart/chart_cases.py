"""Values for each optional feature of the chart: one render case per feature."""

from __future__ import annotations

from typing import Any

ALL_ACTIONS = ("notify", "restartRank", "taintNode", "cordonNode", "drainNode")


def actions(*enabled: str) -> dict[str, Any]:
    return {name: {"enabled": name in enabled} for name in ALL_ACTIONS}


def ladder(*enabled: str) -> dict[str, Any]:
    return {name: {"enabled": name in enabled} for name in ALL_ACTIONS}


GPU_POLICY: dict[str, Any] = {
    "defaultPolicy": "gpu",
    "policies": {
        "gpu": {
            "score": {"kind": "gpuRelative"},
            "thresholds": {"act": 0.6, "recover": 0.8},
            "ladder": ladder("notify", "taintNode", "cordonNode"),
            "budgets": {"nodes": {"maxNodes": 2}, "actionsPerHour": 4},
        }
    },
    "cluster": {"nodes": {"maxNodes": 3, "maxPercent": 5}},
}

FEATURES: dict[str, dict[str, Any]] = {
    "defaults": {},
    "dry-run-mode": {"mode": "dry-run"},
    "enforce-every-action": {
        "mode": "enforce",
        "actions": actions(*ALL_ACTIONS),
        "policy": {"policies": {"default": {"ladder": ladder(*ALL_ACTIONS)}}},
    },
    "node-actions": {"mode": "enforce", "actions": actions("notify", "taintNode", "cordonNode")},
    "restart-rank": {"actions": actions("notify", "restartRank")},
    "drain-node": {"actions": actions("notify", "drainNode")},
    "notify-off": {"actions": actions()},
    "custom-policy": {"policy": GPU_POLICY},
    "no-leader-election": {"controller": {"leaderElection": {"enabled": False}}},
    "high-availability": {
        "controller": {"replicas": 2},
        "podDisruptionBudget": {"enabled": True, "minAvailable": 1},
    },
    "existing-service-account": {"serviceAccount": {"create": False, "name": "platform-sa"}},
    "service-account-annotations": {
        "serviceAccount": {"annotations": {"iam.example.com/role": "pacekeeper"}}
    },
    "metrics-off": {"metrics": {"enabled": False}},
    "metrics-open": {"metrics": {"access": "open"}},
    "metrics-localhost": {"metrics": {"access": "localhost"}},
    "metrics-scrapers": {
        "metrics": {
            "scrapers": [{"namespace": "monitoring", "serviceAccount": "prometheus-k8s"}],
            "serviceMonitor": {"enabled": True},
        }
    },
    "service-monitor-token-secret": {
        "metrics": {
            "serviceMonitor": {
                "enabled": True,
                "bearerTokenSecret": {"name": "prometheus-scrape-token", "key": "token"},
            }
        }
    },
    "webhook": {"webhook": {"enabled": True}},
    "webhook-metrics-open": {"webhook": {"enabled": True}, "metrics": {"access": "open"}},
    "webhook-cert-manager": {
        "webhook": {"enabled": True},
        "tls": {"source": "certManager"},
        "metrics": {"serviceMonitor": {"enabled": True}},
    },
    "webhook-cluster-issuer": {
        "webhook": {"enabled": True, "failurePolicy": "Fail", "timeoutSeconds": 2},
        "tls": {
            "source": "certManager",
            "certManager": {"issuerRef": {"kind": "ClusterIssuer", "name": "platform-ca"}},
        },
    },
    "tls-existing-secret": {
        "webhook": {
            "enabled": True,
            "namespaceSelector": {"matchLabels": {"pacekeeper.dev/inject": "enabled"}},
            "objectSelector": {"matchLabels": {"team": "ml"}},
        },
        "tls": {
            "source": "secret",
            "secret": {
                "name": "platform-tls",
                "caBundle": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==",
            },
        },
    },
    "metrics-network-policy": {"metrics": {"networkPolicy": {"enabled": True}}},
    "service-monitor": {"metrics": {"serviceMonitor": {"enabled": True, "labels": {"p": "k"}}}},
    "prometheus-rule": {"metrics": {"prometheusRule": {"enabled": True}}},
    "grafana-dashboard": {
        "metrics": {"grafanaDashboard": {"enabled": True, "namespace": "monitoring"}}
    },
    "reporter-rbac": {
        "reporterRbac": {
            "enabled": True,
            "bindings": [
                {"namespace": "team-a", "serviceAccount": "llama", "reports": ["llama"]},
                {"namespace": "team-b", "serviceAccount": "trainers"},
            ],
        }
    },
    "scheduling": {
        "controller": {
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "pool", "operator": "In", "values": ["infra"]}
                                ]
                            }
                        ]
                    }
                }
            },
            "priorityClassName": "system-cluster-critical",
            "podAnnotations": {"team": "ml-platform"},
            "podLabels": {"cost-center": "ml"},
            "imagePullSecrets": [{"name": "regcred"}],
        }
    },
    "state-namespace-given": {
        "state": {"namespace": "pk-memory", "createNamespace": False, "migrate": False}
    },
    "text-logs": {"controller": {"logging": {"format": "text", "level": "debug"}}},
    "image-digest": {
        "controller": {
            "image": {
                "repository": "registry.invalid/ml-platform/pacekeeper-controller",
                "tag": "0.1.0",
                "digest": "sha256:" + "0123456789abcdef" * 4,
            }
        }
    },
}


def merged(*layers: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge values the way Helm merges several -f files (later wins)."""
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = merged(out[key], value)
            else:
                out[key] = value
    return out
