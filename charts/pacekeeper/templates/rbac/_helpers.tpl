{{/* Which optional rights the enabled actions need. Each returns "true" or "". */}}

{{- define "pacekeeper.rbac.nodeWrite" -}}
{{- if or .Values.actions.taintNode.enabled .Values.actions.cordonNode.enabled -}}true{{- end -}}
{{- end -}}

{{- define "pacekeeper.rbac.podEviction" -}}
{{- if or .Values.actions.restartRank.enabled .Values.actions.drainNode.enabled -}}true{{- end -}}
{{- end -}}

{{- define "pacekeeper.rbac.labels" -}}
{{ include "pacekeeper.labels" . }}
app.kubernetes.io/component: rbac
{{- end -}}
