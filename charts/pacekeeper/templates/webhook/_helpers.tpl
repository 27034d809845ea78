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

{{/* The pods sent to the webhook. Before 1.21 the release's namespace cannot be left out
by name (pacekeeper.namespacesCarryTheirName), so the webhook's own pods, which carry the
opt-out label, are left out here: with failurePolicy Fail they could otherwise never start.
A user's selector that already leaves that label out is kept as it is. */}}
{{- define "pacekeeper.webhook.objectSelector" -}}
{{- $selector := deepCopy .Values.webhook.objectSelector -}}
{{- if not (include "pacekeeper.namespacesCarryTheirName" .) -}}
{{- $expressions := default (list) $selector.matchExpressions -}}
{{- $optOut := dict "key" "pacekeeper.dev/inject" "operator" "NotIn" "values" (list "false") -}}
{{- $kept := false -}}
{{- range $expressions -}}
{{- if and (eq .key $optOut.key) (eq .operator $optOut.operator) (has "false" .values) -}}
{{- $kept = true -}}
{{- end -}}
{{- end -}}
{{- if not $kept -}}
{{- $_ := set $selector "matchExpressions" (append $expressions $optOut) -}}
{{- end -}}
{{- end -}}
{{- toYaml $selector -}}
{{- end -}}
