{{/*
The operator's permissions, least privilege. Why each one is needed:

  reportfarm.io reportpools                get list watch patch update  kopf watches them; patches
                                                                         its finalizer/annotations
  reportfarm.io reportpools/status         get patch update             decisions, conditions
  apps deployments                          get list watch create patch update delete
                                                                         the renderers of a pool
  "" services                               (same)                       headless metrics Service
  "" configmaps                             (same)                       inline templates
  policy poddisruptionbudgets               (same)                       one renderer evicted at a time
  "" pods                                   get list watch patch         read renderers' IPs and
                                                                         readiness; set the
                                                                         pod-deletion-cost annotation
  "" events, events.k8s.io events           create patch                 kopf's and our Events
  "" secrets                                get                          the queue connection string
                                                                         and admin token a pool names
  kopf.dev kopfpeerings                     get list watch patch         only with peering.enabled
  (cluster-wide, in reportfarm.clusterRules):
  apiextensions.k8s.io customresourcedefinitions  get list watch        kopf resolves resources
  "" namespaces                             list watch                   kopf lists them even for one
                                                                         namespace (else 9 retries
                                                                         and a fallback at start-up)
  kopf.dev clusterkopfpeerings              get list watch patch         peering, all-namespaces mode
*/}}
{{- define "reportfarm.namespacedRules" -}}
- apiGroups: ["reportfarm.io"]
  resources: ["reportpools"]
  verbs: ["get", "list", "watch", "patch", "update"]
- apiGroups: ["reportfarm.io"]
  resources: ["reportpools/status"]
  verbs: ["get", "patch", "update"]
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: [""]
  resources: ["services", "configmaps"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["", "events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{- if and .Values.peering.enabled .Values.watchNamespace }}
- apiGroups: ["kopf.dev"]
  resources: ["kopfpeerings"]
  verbs: ["get", "list", "watch", "patch"]
{{- end }}
{{- end }}

{{- define "reportfarm.clusterRules" -}}
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["list", "watch"]
{{- if not .Values.watchNamespace }}
{{- if .Values.peering.enabled }}
- apiGroups: ["kopf.dev"]
  resources: ["clusterkopfpeerings"]
  verbs: ["get", "list", "watch", "patch"]
{{- end }}
{{- end }}
{{- end }}
