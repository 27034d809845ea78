{{/* The policy document the controller loads (pacekeeper.controller.policy.PolicyDocument):
values.policy under the version header and the chart-wide mode, which the chart owns. */}}

{{- define "pacekeeper.policy.configMapName" -}}
{{- printf "%s-policy" (include "pacekeeper.fullname" .) -}}
{{- end -}}

{{- define "pacekeeper.policy.document" -}}
{{- $doc := dict "apiVersion" "pacekeeper.dev/v1alpha1" "kind" "RemediationPolicies" "mode" .Values.mode -}}
{{- $doc = merge $doc (deepCopy .Values.policy) -}}
{{- toYaml $doc -}}
{{- end -}}

{{/* The pre-install/pre-upgrade check: the controller image's own loader on the document
above, so what JSON schema cannot say (recover above act, defaultPolicy naming a policy
that exists, ...) still fails `helm install` before the controller starts. */}}
{{- define "pacekeeper.policy.checkName" -}}
{{- printf "%s-policy-check" (include "pacekeeper.fullname" .) -}}
{{- end -}}

{{- define "pacekeeper.policy.checkLabels" -}}
{{ include "pacekeeper.labels" . }}
app.kubernetes.io/component: policy-check
{{- end -}}
