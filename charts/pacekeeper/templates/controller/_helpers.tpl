{{/* Controller Deployment helpers. */}}

{{- define "pacekeeper.controller.labels" -}}
{{ include "pacekeeper.labels" . }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "pacekeeper.controller.selectorLabels" -}}
{{ include "pacekeeper.selectorLabels" . }}
app.kubernetes.io/component: controller
{{- end -}}

{{/* repository@digest when a digest is set (it pins what runs), else repository:tag.
The default repository names what `make image` leaves on the build machine; installed as
it is, every pod (the pre-install policy check first) would wait on a pull that cannot
succeed, so the chart refuses it unless pullPolicy Never says it is already on the nodes. */}}
{{- define "pacekeeper.controller.image" -}}
{{- $image := .Values.controller.image -}}
{{- if and (eq $image.repository "localhost/pacekeeper-controller") (ne $image.pullPolicy "Never") -}}
{{- fail "controller.image.repository is localhost/pacekeeper-controller, the image `make image` builds on this machine, which no node can pull: push it to your registry and set controller.image.repository (and controller.image.tag or controller.image.digest) as docs/install.md's Install shows. An image you loaded onto every node yourself (kind load) needs controller.image.pullPolicy=Never." -}}
{{- end -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "pacekeeper.controller.leaseName" -}}
{{- printf "%s-leader" (include "pacekeeper.fullname" .) -}}
{{- end -}}

{{/* The operator command line: the contract documented in docs/install.md. */}}
{{- define "pacekeeper.controller.command" -}}
- pacekeeper
- operator
- run
- --policy
- /etc/pacekeeper/policy.yaml
- --mode
- {{ .Values.mode }}
- {{ ternary "--leader-election" "--no-leader-election" .Values.controller.leaderElection.enabled }}
- --metrics-port
- {{ ternary .Values.metrics.port 0 .Values.metrics.enabled | quote }}
{{- if .Values.metrics.enabled }}
- --metrics-access
- {{ .Values.metrics.access }}
{{- if include "pacekeeper.metrics.authenticated" . }}
- --metrics-tls-dir
- {{ include "pacekeeper.tls.mountPath" . }}
{{- end }}
{{- end }}
- --log-format
- {{ .Values.controller.logging.format }}
- --on-invalid-policy
- wait
{{- with .Values.controller.workers }}
- --workers
- {{ . | quote }}
{{- end }}
{{- end -}}
