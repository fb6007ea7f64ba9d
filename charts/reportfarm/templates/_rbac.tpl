{{/*
Where the operator acts. By default a Role and RoleBinding in each namespace it watches
(watchNamespaces, else the release's own namespace): nothing cluster-scoped at all. Only
rbac.clusterWide grants the same rules in every namespace (a ClusterRole and its binding).
*/}}
{{- define "reportfarm.watchedNamespaces" -}}
{{- $names := concat (.Values.watchNamespaces | default list) (compact (list .Values.watchNamespace)) | uniq -}}
{{- if .Values.rbac.clusterWide -}}
{{- if $names -}}
{{- fail "rbac.clusterWide watches every namespace: leave watchNamespaces and watchNamespace empty" -}}
{{- end -}}
{{- else -}}
{{- ($names | default (list .Release.Namespace)) | join "," -}}
{{- end -}}
{{- end -}}

{{/*
The operator's permissions, least privilege: exactly the calls it makes (its end-to-end test runs
it as a ServiceAccount holding only the chart's default Role). Why each one is needed:

  reportfarm.io reportpools                list watch patch     kopf watches them; patches its
                                                                  annotations (progress, last state)
  reportfarm.io reportpools/status         patch                decisions, conditions
  apps deployments                          get create patch     the renderers of a pool
  "" services                               get create patch     headless metrics Service
  policy poddisruptionbudgets               get create patch     one renderer evicted at a time
  "" configmaps                             get create update delete
                                                                  inline templates
  "" pods                                   list patch           read renderers' IPs and readiness;
                                                                  set pod-deletion-cost
  "" events                                 create               kopf's and our Events
  "" secrets                                get                  the queue connection string and
                                                                  admin token a pool names
  kopf.dev kopfpeerings                     get list watch patch only with peering.enabled
  (cluster-wide, all-namespaces mode with peering):
  kopf.dev clusterkopfpeerings              get list watch patch
The operator turns off kopf's CRD and namespace scanning, so it needs no cluster-scoped read.
*/}}
{{- define "reportfarm.namespacedRules" -}}
- apiGroups: ["reportfarm.io"]
  resources: ["reportpools"]
  verbs: ["list", "watch", "patch"]
- apiGroups: ["reportfarm.io"]
  resources: ["reportpools/status"]
  verbs: ["patch"]
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "create", "patch"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "create", "patch"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "create", "patch"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "create", "update", "delete"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "patch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{- if and .Values.peering.enabled (not .Values.rbac.clusterWide) }}
- apiGroups: ["kopf.dev"]
  resources: ["kopfpeerings"]
  verbs: ["get", "list", "watch", "patch"]
{{- end }}
{{- end }}

{{- define "reportfarm.clusterRules" -}}
{{- if .Values.rbac.clusterWide }}
{{- if .Values.peering.enabled }}
- apiGroups: ["kopf.dev"]
  resources: ["clusterkopfpeerings"]
  verbs: ["get", "list", "watch", "patch"]
{{- end }}
{{- end }}
{{- end }}
