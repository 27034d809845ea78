{{/* Admission webhook helpers (the Service name is in tls/_helpers.tpl: the certificate
names it). */}}

{{- define "pacekeeper.webhook.labels" -}}
{{ include "pacekeeper.labels" . }}
app.kubernetes.io/component: webhook
{{- end -}}

{{- define "pacekeeper.webhook.selectorLabels" -}}
{{ include "pacekeeper.selectorLabels" . }}
app.kubernetes.io/component: webhook
{{- end -}}

{{- define "pacekeeper.webhook.path" -}}/mutate-pods{{- end -}}

{{/* The command the webhook pods run: the contract documented in docs/install.md. */}}
{{- define "pacekeeper.webhook.command" -}}
- pacekeeper
- webhook
- serve
- --port
- {{ .Values.webhook.port | quote }}
- --tls-dir
- {{ include "pacekeeper.tls.mountPath" . }}
- --log-format
- {{ .Values.controller.logging.format }}
{{- end -}}
