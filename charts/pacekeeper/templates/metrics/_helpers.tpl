{{/* Metrics Service, ServiceMonitor and PrometheusRule helpers. */}}

{{- define "pacekeeper.metrics.serviceName" -}}
{{- printf "%s-metrics" (include "pacekeeper.fullname" .) -}}
{{- end -}}

{{- define "pacekeeper.metrics.labels" -}}
{{ include "pacekeeper.labels" . }}
app.kubernetes.io/component: metrics
{{- end -}}

{{- define "pacekeeper.metrics.readerName" -}}
{{- printf "%s-metrics-reader" (include "pacekeeper.fullname" .) -}}
{{- end -}}

{{/* Reachable through a Service: not with access=localhost (127.0.0.1 in the pod). */}}
{{- define "pacekeeper.metrics.served" -}}
{{- if and .Values.metrics.enabled (ne .Values.metrics.access "localhost") -}}true{{- end -}}
{{- end -}}
