{{/* Rights a training job needs to publish its StragglerReport. */}}

{{- define "pacekeeper.reporter.roleName" -}}
{{- printf "%s-reporter" (include "pacekeeper.fullname" .) -}}
{{- end -}}

{{- define "pacekeeper.reporter.labels" -}}
{{ include "pacekeeper.labels" . }}
app.kubernetes.io/component: reporter
{{- end -}}
