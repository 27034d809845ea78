{{/* Metrics Service, ServiceMonitor and PrometheusRule helpers. */}}

{{- define "pacekeeper.metrics.serviceName" -}}
{{- printf "%s-metrics" (include "pacekeeper.fullname" .) -}}
{{- end -}}

{{- define "pacekeeper.metrics.labels" -}}
{{ include "pacekeeper.labels" . }}
app.kubernetes.io/component: metrics
{{- end -}}
