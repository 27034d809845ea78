{{/* The serving certificate of the metrics endpoint (metrics.access=kubernetes) and the
admission webhook: one kubernetes.io/tls Secret (tls.crt, tls.key, ca.crt) that their pods
mount. The kubelet reads it; no pacekeeper process has Secret access through the API. */}}

{{- define "pacekeeper.metrics.authenticated" -}}
{{- if and .Values.metrics.enabled (eq .Values.metrics.access "kubernetes") -}}true{{- end -}}
{{- end -}}

{{- define "pacekeeper.tls.needed" -}}
{{- if or (include "pacekeeper.metrics.authenticated" .) .Values.webhook.enabled -}}true{{- end -}}
{{- end -}}

{{- define "pacekeeper.tls.secretName" -}}
{{- if eq .Values.tls.source "secret" -}}
{{- .Values.tls.secret.name -}}
{{- else -}}
{{- printf "%s-tls" (include "pacekeeper.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "pacekeeper.tls.mountPath" -}}/var/run/secrets/pacekeeper.dev/tls{{- end -}}

{{- define "pacekeeper.webhook.serviceName" -}}
{{- printf "%s-webhook" (include "pacekeeper.fullname" .) -}}
{{- end -}}

{{/* Every name a client may verify: the metrics and webhook Services, short and long. */}}
{{- define "pacekeeper.tls.dnsNames" -}}
{{- $ns := .Release.Namespace -}}
{{- $names := list -}}
{{- range $svc := list (include "pacekeeper.metrics.serviceName" .) (include "pacekeeper.webhook.serviceName" .) -}}
{{- $names = concat $names (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns)) -}}
{{- end -}}
{{- toJson $names -}}
{{- end -}}

{{/* The Helm-generated CA and certificate (tls.source=helm), base64 as a Secret holds
them. Made once per render and kept in .Values._pacekeeperGeneratedTls, so the Secret and
the webhook's caBundle (other templates) carry the same CA. An installed Secret is reused
on upgrade (lookup) until renewBeforeDays before its recorded expiry; then, or when it is
gone, a new CA and certificate are made, and the bundle keeps the previous CA next to the
new one: pods still serving the old certificate (until the kubelet refreshes their
volume) stay trusted by the apiserver and Prometheus. helm template and --dry-run cannot
look up, so they always show a fresh one. */}}
{{- define "pacekeeper.tls.generated" -}}
{{- if not (hasKey .Values "_pacekeeperGeneratedTls") -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "pacekeeper.tls.secretName" .) | default dict -}}
{{- include "pacekeeper.tls.generate" (dict "root" . "existing" $existing) -}}
{{- end -}}
{{- end -}}

{{/* The decision itself, given the installed Secret (or an empty dict): kept apart from
the lookup so that a test can hand it any Secret. */}}
{{- define "pacekeeper.tls.generate" -}}
{{- $root := .root -}}
{{- $existing := .existing -}}
{{- $layout := "2006-01-02T15:04:05Z07:00" -}}
{{- $data := dig "data" dict $existing -}}
{{- $notAfter := dig "metadata" "annotations" "pacekeeper.dev/not-after" "" $existing -}}
{{- $keep := false -}}
{{- if and (index $data "ca.crt") (index $data "tls.crt") (index $data "tls.key") $notAfter -}}
{{- $left := sub (toDate $layout $notAfter | unixEpoch | int64) (now | unixEpoch | int64) -}}
{{- if gt $left (mul (int $root.Values.tls.helm.renewBeforeDays) 86400) -}}
{{- $keep = true -}}
{{- end -}}
{{- end -}}
{{- if $keep -}}
{{- $_ := set $root.Values "_pacekeeperGeneratedTls" (dict "ca" (index $data "ca.crt") "crt" (index $data "tls.crt") "key" (index $data "tls.key") "notAfter" $notAfter) -}}
{{- else -}}
{{- $days := int $root.Values.tls.helm.validityDays -}}
{{- $ca := genCAWithKey (printf "%s-ca" (include "pacekeeper.fullname" $root)) $days (genPrivateKey "ecdsa") -}}
{{- $names := include "pacekeeper.tls.dnsNames" $root | fromJsonArray -}}
{{- $cert := genSignedCertWithKey (index $names 2) nil $names $days $ca (genPrivateKey "ecdsa") -}}
{{- $until := now | dateModify (printf "+%dh" (mul $days 24)) | date $layout -}}
{{- $previous := regexFind "(?s)-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----" (index $data "ca.crt" | default "" | b64dec) -}}
{{- $bundle := printf "%s%s" $ca.Cert (ternary (printf "%s\n" $previous) "" (ne $previous "")) -}}
{{- $_ := set $root.Values "_pacekeeperGeneratedTls" (dict "ca" (b64enc $bundle) "crt" (b64enc $cert.Cert) "key" (b64enc $cert.Key) "notAfter" $until) -}}
{{- end -}}
{{- end -}}

{{/* The PEM CA bundle (base64) clients trust: the webhook's caBundle. */}}
{{- define "pacekeeper.tls.caBundle" -}}
{{- if eq .Values.tls.source "helm" -}}
{{- include "pacekeeper.tls.generated" . -}}
{{- .Values._pacekeeperGeneratedTls.ca -}}
{{- else if eq .Values.tls.source "secret" -}}
{{- .Values.tls.secret.caBundle -}}
{{- end -}}
{{- end -}}

{{/* A pod volume with the Secret, keys only (ca.crt is not needed to serve). */}}
{{- define "pacekeeper.tls.volume" -}}
- name: tls
  secret:
    secretName: {{ include "pacekeeper.tls.secretName" . }}
    defaultMode: 0440
    items:
      - key: tls.crt
        path: tls.crt
      - key: tls.key
        path: tls.key
{{- end -}}
