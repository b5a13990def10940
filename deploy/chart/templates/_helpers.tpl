{{/* Labels every object of the chart carries (deploy/'s files carry part-of too). */}}
{{- define "kai.labels" -}}
app.kubernetes.io/part-of: kai
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}

{{/* The scheduler's image: {registry}/{name}:{tag}, or {name}:{tag} without a registry. */}}
{{- define "kai.image" -}}
{{- $tag := .Values.scheduler.image.tag | default .Values.global.tag | default .Chart.AppVersion -}}
{{- with .Values.global.registry }}{{ . }}/{{ end }}{{ .Values.scheduler.image.name }}:{{ $tag }}
{{- end }}

{{/* Refuse KAI values kai does not honour instead of ignoring them. */}}
{{- define "kai.refuseUnsupported" -}}
{{- if .Values.prometheus.enabled -}}
{{- fail "prometheus.enabled: kai's chart does not deploy Prometheus; set the SchedulingShard's usageDBConfig to yours (docs/cluster.md, time-based fair share)" -}}
{{- end -}}
{{- if not (has .Values.scheduler.placementStrategy (list "binpack" "spread")) -}}
{{- fail (printf "scheduler.placementStrategy: %q is not binpack or spread" .Values.scheduler.placementStrategy) -}}
{{- end -}}
{{- end }}
