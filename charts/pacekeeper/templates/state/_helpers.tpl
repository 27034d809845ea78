{{/* Where the controller keeps its state ConfigMaps: a namespace of their own, so that its
Role there may write every ConfigMap (RBAC cannot name the hashed job maps) while it
writes none in the release namespace, where its policy lives (docs/security.md). */}}
{{- define "pacekeeper.state.namespace" -}}
{{- $ns := .Values.state.namespace | default (printf "%s-state" .Release.Namespace | trunc 63 | trimAll "-") -}}
{{- if eq $ns .Release.Namespace -}}
{{- fail (printf "state.namespace=%s is the release namespace: the controller would then write ConfigMaps beside its policy (docs/security.md); name a namespace of its own" $ns) -}}
{{- end -}}
{{- $ns -}}
{{- end -}}
