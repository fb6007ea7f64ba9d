{{/*
The gateway's name (Deployment, Service, Ingress).
*/}}
{{- define "reportfarm.gatewayName" -}}
{{- printf "%s-gateway" (include "reportfarm.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The gateway pods' selector (immutable once the Deployment exists).
*/}}
{{- define "reportfarm.gatewaySelectorLabels" -}}
{{ include "reportfarm.selectorLabels" . }}
app.kubernetes.io/component: gateway
{{- end }}

{{/*
The gateway image: repository:tag (tag defaults to appVersion), or repository@digest.
*/}}
{{- define "reportfarm.gatewayImage" -}}
{{- $image := .Values.gateway.image }}
{{- if $image.digest }}
{{- printf "%s@%s" $image.repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) }}
{{- end }}
{{- end }}
