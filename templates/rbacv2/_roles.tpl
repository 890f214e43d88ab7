{{- /* A role of Deckhouse's rbacv2 model (deckhouse/deckhouse modules/140-user-authz/templates/rbacv2):
an empty ClusterRole that kube-controller-manager fills with the rules of every ClusterRole carrying
`rbac.deckhouse.io/kind: <kind>` and `rbac.deckhouse.io/aggregate-to-gpu-as: <level>`, itself labelled
to be aggregated into the module's next level and into Deckhouse's role of all modules.
Usage: {{ include "gpu.rbacv2.role" (list . "d8:use:role:user:gpu" "use" "user" (dict "rbac.deckhouse.io/aggregate-to-gpu-as" "manager" "rbac.deckhouse.io/aggregate-to-all-as" "user")) }} */ -}}
{{- define "gpu.rbacv2.role" -}}
{{- $ctx := index . 0 -}}
{{- $labels := merge (dict "rbac.deckhouse.io/kind" (index . 2)) (index . 4) -}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ index . 1 }}
  {{- include "helm_lib_module_labels" (list $ctx $labels) | nindent 2 }}
aggregationRule:
  clusterRoleSelectors:
  - matchLabels:
      rbac.deckhouse.io/kind: {{ index . 2 }}
      rbac.deckhouse.io/aggregate-to-gpu-as: {{ index . 3 }}
rules: []
{{- end -}}
