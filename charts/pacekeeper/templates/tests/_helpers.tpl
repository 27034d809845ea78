{{/* helm test hook helpers. */}}

{{- define "pacekeeper.tests.image" -}}
{{- printf "%s:%s" .Values.tests.image.repository .Values.tests.image.tag -}}
{{- end -}}
