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
