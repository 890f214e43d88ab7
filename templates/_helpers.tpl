{{- /*
The module's own Helm helpers. lib-helm cannot be vendored here (no chart repository is reachable
from the build machines), so the few helpers the templates need are written out, following lib-helm's
behaviour where one exists (named in each comment).
*/ -}}

{{- /* Image reference from global.modulesImages digests (lib-helm helm_lib_module_image).
Usage: {{ include "gpu.image" (list . "gpuController") }} */ -}}
{{- define "gpu.image" -}}
{{- $ctx := index . 0 -}}
{{- $name := index . 1 -}}
{{- $digest := dig "gpu" $name "" $ctx.Values.global.modulesImages.digests -}}
{{- if not $digest }}{{ fail (printf "image gpu.%s has no digest in global.modulesImages.digests" $name) }}{{ end -}}
{{- $registry := $ctx.Values.global.modulesImages.registry.base -}}
{{- $own := dig "registry" "base" "" $ctx.Values.gpu -}}
{{- if $own }}{{ $registry = printf "%s/gpu" (trimAll "/" $own) }}{{ end -}}
{{- printf "%s@%s" $registry $digest -}}
{{- end -}}

{{- /* An image shared by every Deckhouse module (lib-helm helm_lib_module_common_image). */ -}}
{{- define "gpu.commonImage" -}}
{{- $ctx := index . 0 -}}
{{- $name := index . 1 -}}
{{- $digest := dig "common" $name "" $ctx.Values.global.modulesImages.digests -}}
{{- if not $digest }}{{ fail (printf "image common.%s has no digest in global.modulesImages.digests" $name) }}{{ end -}}
{{- printf "%s@%s" $ctx.Values.global.modulesImages.registry.base $digest -}}
{{- end -}}

{{- /* Labels every object of the module carries (lib-helm helm_lib_module_labels).
Usage: {{ include "gpu.labels" (list . (dict "app" "gpu-controller")) }} */ -}}
{{- define "gpu.labels" -}}
{{- $extra := dict -}}
{{- if gt (len .) 1 }}{{ $extra = index . 1 }}{{ end -}}
labels:
  heritage: deckhouse
  module: gpu
{{- range $key, $value := $extra }}
  {{ $key }}: {{ $value | quote }}
{{- end }}
{{- end -}}

{{- define "gpu.namespace" -}}d8-gpu{{- end -}}

{{- /* "true" when gpu-controller runs several replicas: the module setting, else the global one,
else whether the control plane itself is highly available (lib-helm helm_lib_ha_enabled). */ -}}
{{- define "gpu.haEnabled" -}}
{{- if hasKey .Values.gpu "highAvailability" -}}
{{- .Values.gpu.highAvailability -}}
{{- else if hasKey .Values.global "highAvailability" -}}
{{- .Values.global.highAvailability -}}
{{- else -}}
{{- dig "discovery" "clusterControlPlaneIsHighlyAvailable" false .Values.global -}}
{{- end -}}
{{- end -}}

{{- /* Pod fields shared by every workload: pull secret and priority class (lib-helm helm_lib_priority_class). */ -}}
{{- define "gpu.podCommon" -}}
{{- $priority := index . 1 -}}
imagePullSecrets:
- name: gpu-module-registry
priorityClassName: {{ $priority }}
{{- end -}}

{{- /* Tolerations of node components: the admin's list, plus the taints Deckhouse puts on nodes that are
still joining (lib-helm helm_lib_tolerations "any-node" without the wildcard). */ -}}
{{- define "gpu.nodeTolerations" -}}
tolerations:
- key: node.deckhouse.io/uninitialized
  operator: Exists
  effect: NoSchedule
- key: node.kubernetes.io/not-ready
  operator: Exists
- key: node.kubernetes.io/unreachable
  operator: Exists
{{- with .Values.gpu.tolerations }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- /* Tolerations and placement of control-plane Deployments (lib-helm helm_lib_node_selector "master"). */ -}}
{{- define "gpu.controlPlanePlacement" -}}
nodeSelector:
  node-role.kubernetes.io/control-plane: ""
tolerations:
- key: node-role.kubernetes.io/control-plane
  operator: Exists
- key: node-role.kubernetes.io/master
  operator: Exists
{{- end -}}

{{- /* Node affinity of a node component placed by the bootstrap node lists. With an empty list it
renders a selector no node matches, so the DaemonSet exists but runs nowhere.
Usage: {{ include "gpu.bootstrapAffinity" (list . "gpuHandler") }} */ -}}
{{- define "gpu.bootstrapAffinity" -}}
{{- $ctx := index . 0 -}}
{{- $nodes := dig (index . 1) "nodes" list $ctx.Values.gpu.internal.bootstrap -}}
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions:
        {{- if $nodes }}
        - key: kubernetes.io/hostname
          operator: In
          values: {{ $nodes | sortAlpha | toJson }}
        {{- else }}
        - key: gpu.deckhouse.io/no-nodes
          operator: Exists
        {{- end }}
        {{- include "gpu.gpuNodeExpressions" $ctx | nindent 8 }}
        {{- if has (index . 1) (list "dcgm" "dcgmExporter") }}
        {{- /* gpu-handler labels its Node while a MIG mode change waits for DCGM to let the cards go
        (as NVIDIA's MIG manager pauses GPU clients); the DaemonSet controller then removes the Pod. */}}
        - key: gpu.deckhouse.io/dcgm-paused
          operator: DoesNotExist
        {{- end }}
{{- end -}}

{{- /* Node selector expressions of every node component: not the control plane, and the admin's labels. */ -}}
{{- define "gpu.gpuNodeExpressions" -}}
- key: node-role.kubernetes.io/control-plane
  operator: DoesNotExist
{{- range $key, $value := .Values.gpu.nodeSelector }}
- key: {{ $key }}
  operator: In
  values: [{{ $value | quote }}]
{{- end }}
{{- end -}}

{{- /* The bootstrap hash of a component, for the pod annotation that rolls Pods when the list changes. */ -}}
{{- define "gpu.bootstrapHash" -}}
{{- dig (index . 1) "hash" "" (index . 0).Values.gpu.internal.bootstrap -}}
{{- end -}}

{{- /* "true" when the API server serves resource.k8s.io/v1 (Kubernetes >= 1.34, found by the
feature-discovery hook); empty before the hook has run. */ -}}
{{- define "gpu.draServed" -}}
{{- $version := .Values.gpu.internal.kubernetes.serverVersion -}}
{{- if and $version (semverCompare ">=1.34.0-0" $version) }}true{{ end -}}
{{- end -}}

{{- /* "true" when the API server has feature gate (index . 1) enabled. */ -}}
{{- define "gpu.featureGate" -}}
{{- if has (index . 1) (index . 0).Values.gpu.internal.kubernetes.featureGates }}true{{ end -}}
{{- end -}}

{{- /* A VPA for one workload (every controller needs one; updateMode is never Auto). */ -}}
{{- define "gpu.vpa" -}}
{{- $ctx := index . 0 -}}
{{- $kind := index . 1 -}}
{{- $name := index . 2 -}}
{{- $containers := index . 3 -}}
{{- if has "vertical-pod-autoscaler-crd" $ctx.Values.global.enabledModules }}
---
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata:
  name: {{ $name }}
  namespace: d8-gpu
  {{- include "gpu.labels" (list $ctx (dict "app" $name "workload-resource-policy.deckhouse.io" (ternary "every-node" "master" (eq $kind "DaemonSet")))) | nindent 2 }}
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
{{- end }}
{{- end -}}
