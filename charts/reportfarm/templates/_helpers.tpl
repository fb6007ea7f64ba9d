{{/*
The chart's name (nameOverride wins).
*/}}
{{- define "reportfarm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
A fully qualified name for the release's resources, at most 63 characters (DNS label).
The release name is used alone when it already contains the chart name.
*/}}
{{- define "reportfarm.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
chart label: name-version.
*/}}
{{- define "reportfarm.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Common labels on every resource of the release.
*/}}
{{- define "reportfarm.labels" -}}
helm.sh/chart: {{ include "reportfarm.chart" . }}
{{ include "reportfarm.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: reportfarm
{{- end }}

{{/*
Selector labels: the release's objects. Every template adds its own app.kubernetes.io/component.
*/}}
{{- define "reportfarm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "reportfarm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The operator pods' selector (immutable once the Deployment exists). The component matters:
renderer pods also carry app.kubernetes.io/name=reportfarm, with their ReportPool as instance.
*/}}
{{- define "reportfarm.operatorSelectorLabels" -}}
{{ include "reportfarm.selectorLabels" . }}
app.kubernetes.io/component: operator
{{- end }}

{{/*
The operator's ServiceAccount name.
*/}}
{{- define "reportfarm.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "reportfarm.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The operator image: repository:tag (tag defaults to appVersion), or repository@digest.
*/}}
{{- define "reportfarm.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The name of the Service in front of the operator's metrics.
*/}}
{{- define "reportfarm.metricsServiceName" -}}
{{- printf "%s-metrics" (include "reportfarm.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The namespace of an optional integration object: its own value, else the release's.
Usage: include "reportfarm.namespace" (list . .Values.metrics.serviceMonitor.namespace)
*/}}
{{- define "reportfarm.namespace" -}}
{{- $root := index . 0 }}
{{- default $root.Release.Namespace (index . 1) }}
{{- end }}
