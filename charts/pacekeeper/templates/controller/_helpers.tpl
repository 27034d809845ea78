{{/* Controller Deployment helpers. */}}

{{- define "pacekeeper.controller.labels" -}}
{{ include "pacekeeper.labels" . }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "pacekeeper.controller.selectorLabels" -}}
{{ include "pacekeeper.selectorLabels" . }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "pacekeeper.controller.image" -}}
{{- printf "%s:%s" .Values.controller.image.repository (default .Chart.AppVersion .Values.controller.image.tag) -}}
{{- end -}}

{{- define "pacekeeper.controller.leaseName" -}}
{{- printf "%s-leader" (include "pacekeeper.fullname" .) -}}
{{- end -}}

{{/* The operator command line: the contract documented in docs/install.md. */}}
{{- define "pacekeeper.controller.command" -}}
- pacekeeper
- operator
- run
- --policy
- /etc/pacekeeper/policy.yaml
- --mode
- {{ .Values.mode }}
- {{ ternary "--leader-election" "--no-leader-election" .Values.controller.leaderElection.enabled }}
- --metrics-port
- {{ ternary .Values.metrics.port 0 .Values.metrics.enabled | quote }}
- --log-format
- {{ .Values.controller.logging.format }}
{{- end -}}
