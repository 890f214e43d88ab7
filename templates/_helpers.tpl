{{- /*
The module's own Helm helpers, only for what lib-helm (charts/deckhouse_lib_helm-*.tgz, the helm_lib_*
helpers) does not provide: where node components run (bootstrap node labels, GPU node expressions,
tolerations with the admin's list), what the API server serves, and one VPA per workload.
Images, labels, priority classes, placement of controllers, HA, security contexts, PDB values, the
kube-rbac-proxy CA and resources, monitoring objects and proxy envs come from lib-helm.
*/ -}}

{{- /* Tolerations of node components: lib-helm's "any-node" strategy (control plane, every
dedicated.deckhouse.io taint, cluster-autoscaler taints, the cluster's customTolerationKeys) with nodes
still joining or under pressure ("with-uninitialized"), plus the module's `tolerations` setting for GPU
taints such as nvidia.com/gpu (lib-helm reads the module's list only for its system-like strategies). */ -}}
{{- define "gpu.nodeTolerations" -}}
{{- include "helm_lib_tolerations" (tuple . "any-node" "with-uninitialized") | trim }}
{{- with .Values.gpu.tolerations }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- /* Placement of the cluster-wide controllers: lib-helm's "master" node selector (control-plane nodes,
else nodes of role control-plane or system, else any node) and its "any-node" tolerations. */ -}}
{{- define "gpu.controlPlanePlacement" -}}
{{- with include "helm_lib_node_selector" (tuple . "master") | trim }}{{ . }}
{{ end -}}
{{ include "helm_lib_tolerations" (tuple . "any-node") | trim }}
{{- end -}}

{{- /* Node affinity of a node component that waits for its node's bootstrap, by node labels only, so that
one node's change (an NVIDIA card found, a driver proven, a DCGM pause) changes no Pod template and
restarts nothing on any other node: the DaemonSet controller adds or removes the Pod on that node alone
(it removes a running Pod whose node stops matching). "validator" (the driver validator) needs an NVIDIA
card on PCI (label gpu.deckhouse.io/nvidia-gpu=true, set by the NodeGroupConfiguration
gpu-detect-node.sh, as for gpu-node-agent); "gpuHandler", "dcgm" and "dcgmExporter" need a card whose
driver is proven (label gpu.deckhouse.io/driver-ready=true, kept by the hook bootstrap-nodes while a
PhysicalGPU of the node is DriverReady). With a third argument true the node must also have CDI on in
its container runtime (label gpu.deckhouse.io/cdi=true, set by gpu-detect-node.sh): gpu-handler hands
GPUs to containers only through CDI.
Usage: {{ include "gpu.bootstrapAffinity" (list . "gpuHandler" true) }} */ -}}
{{- define "gpu.bootstrapAffinity" -}}
{{- $ctx := index . 0 -}}
{{- $needsCDI := and (gt (len .) 2) (index . 2) -}}
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions:
        - key: {{ ternary "gpu.deckhouse.io/nvidia-gpu" "gpu.deckhouse.io/driver-ready" (eq (index . 1) "validator") }}
          operator: In
          values: ["true"]
        {{- if $needsCDI }}
        - key: gpu.deckhouse.io/cdi
          operator: In
          values: ["true"]
        {{- end }}
        {{- include "gpu.gpuNodeExpressions" $ctx | nindent 8 }}
        {{- if has (index . 1) (list "dcgm" "dcgmExporter") }}
        {{- /* gpu-handler labels its Node while a MIG mode change waits for DCGM to let the cards go
        (as NVIDIA's MIG manager pauses GPU clients); the DaemonSet controller then removes the Pod. */}}
        - key: gpu.deckhouse.io/dcgm-paused
          operator: DoesNotExist
        {{- end }}
{{- end -}}

{{- /* Node selector expressions of every node component: not the control plane, not a node of a
NodeGroup with spec.gpu (node-manager's NVIDIA stack manages those cards; the hook node-groups lists
those NodeGroups from the NodeGroups themselves, and node-manager labels each node with its group), and
the admin's labels. The label node.deckhouse.io/gpu decides nothing: node-manager stops setting it once
this module is enabled and never removes it. */ -}}
{{- define "gpu.gpuNodeExpressions" -}}
- key: node-role.kubernetes.io/control-plane
  operator: DoesNotExist
{{- with dig "nodeManagerGPU" "nodeGroups" list .Values.gpu.internal }}
- key: node.deckhouse.io/group
  operator: NotIn
  values: {{ . | sortAlpha | toJson }}
{{- end }}
{{- range $key, $value := .Values.gpu.nodeSelector }}
- key: {{ $key }}
  operator: In
  values: [{{ $value | quote }}]
{{- end }}
{{- end -}}

{{- /* "true" when the API server has feature gate (index . 1) enabled (hook feature-gates). */ -}}
{{- define "gpu.featureGate" -}}
{{- if has (index . 1) (index . 0).Values.gpu.internal.kubernetes.featureGates }}true{{ end -}}
{{- end -}}

{{- /* The module's registry pull secret, on every Pod of the module. */ -}}
{{- define "gpu.imagePullSecrets" -}}
imagePullSecrets:
- name: gpu-module-registry
{{- end -}}

{{- /* A VPA for one workload (dmt: every controller needs one with bounds per container; updateMode is
never Auto). lib-helm's helm_lib_resources_management_vpa_spec serves a single container with a
user-set resourcesManagement; this serves the module's fixed bounds for several containers.
Usage: {{ include "gpu.vpa" (list . "DaemonSet" "gpu-handler" (list (dict "name" "gpu-handler"
         "min" (dict "cpu" "10m" "memory" "50Mi") "max" (dict "cpu" "200m" "memory" "256Mi"))) true) }}
The last argument adds lib-helm's policy of the kube-rbac-proxy sidecar. */ -}}
{{- define "gpu.vpa" -}}
{{- $ctx := index . 0 -}}
{{- $kind := index . 1 -}}
{{- $name := index . 2 -}}
{{- $containers := index . 3 -}}
{{- $proxy := and (gt (len .) 4) (index . 4) -}}
{{- if has "vertical-pod-autoscaler" $ctx.Values.global.enabledModules }}
---
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata:
  name: {{ $name }}
  namespace: d8-{{ $ctx.Chart.Name }}
  {{- include "helm_lib_module_labels" (list $ctx (dict "app" $name "workload-resource-policy.deckhouse.io" (ternary "every-node" "master" (eq $kind "DaemonSet")))) | nindent 2 }}
spec:
  targetRef:
    apiVersion: apps/v1
    kind: {{ $kind }}
    name: {{ $name }}
  updatePolicy:
    updateMode: "InPlaceOrRecreate"
  resourcePolicy:
    containerPolicies:
    {{- range $containers }}
    - containerName: {{ .name }}
      minAllowed: {cpu: {{ .min.cpu }}, memory: {{ .min.memory }}}
      maxAllowed: {cpu: {{ .max.cpu }}, memory: {{ .max.memory }}}
    {{- end }}
    {{- if $proxy }}
    {{- include "helm_lib_vpa_kube_rbac_proxy_resources" $ctx | nindent 4 }}
    {{- end }}
{{- end }}
{{- end -}}

{{- /* Container resources: lib-helm's ephemeral storage for logs, and cpu/memory requests only when no
VPA sets them. Usage: {{ include "gpu.resources" (list . (dict "cpu" "10m" "memory" "50Mi")) }} */ -}}
{{- define "gpu.resources" -}}
{{- $ctx := index . 0 -}}
{{- $requests := index . 1 -}}
resources:
  requests:
    {{- include "helm_lib_module_ephemeral_storage_only_logs" $ctx | nindent 4 }}
    {{- if not (has "vertical-pod-autoscaler" $ctx.Values.global.enabledModules) }}
    cpu: {{ $requests.cpu }}
    memory: {{ $requests.memory }}
    {{- end }}
{{- end -}}
