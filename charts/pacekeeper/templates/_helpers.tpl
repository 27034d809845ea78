{{/* Names and labels shared by every component. */}}

{{- define "pacekeeper.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: <release>-<chart>, or the release name when it already contains the chart name. */}}
{{- define "pacekeeper.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "pacekeeper.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "pacekeeper.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pacekeeper.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "pacekeeper.labels" -}}
helm.sh/chart: {{ include "pacekeeper.chart" . }}
{{ include "pacekeeper.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: pacekeeper
{{- end -}}

{{- define "pacekeeper.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "pacekeeper.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Version gates. They read .Capabilities.KubeVersion, never .Capabilities.APIVersions:
`helm template` and client dry-runs claim every group version Helm's client knows, so only
the version tells an old server apart there. Non-empty means yes. The floor is 1.20
(Chart.yaml kubeVersion, the real-server tier's kube-apiserver). */}}

{{/* policy/v1 PodDisruptionBudget: GA in 1.21 (policy/v1beta1 is gone from 1.25). */}}
{{- define "pacekeeper.pdbApiVersion" -}}
{{- ternary "policy/v1" "policy/v1beta1" (semverCompare ">=1.21.0-0" .Capabilities.KubeVersion.Version) -}}
{{- end -}}

{{/* The API server labels every namespace with kubernetes.io/metadata.name from 1.21 on;
before that a selector on it matches namespaces without the label, i.e. all of them. */}}
{{- define "pacekeeper.namespacesCarryTheirName" -}}
{{- if semverCompare ">=1.21.0-0" .Capabilities.KubeVersion.Version -}}yes{{- end -}}
{{- end -}}
