{{- /*
The kube-rbac-proxy sidecar in front of a component's HTTP server (probes and /metrics). lib-helm has
no sidecar helper (deckhouse/virtualization keeps its own in the same place); the image, resources,
VPA policy and security context come from lib-helm.
The component binds 127.0.0.1 only; the proxy serves TLS (certificate from the tls-certificates hook,
Secret gpu-metrics-tls, mounted at /etc/kube-rbac-proxy: the mount point Deckhouse's common
kube-rbac-proxy image pre-creates) and lets through /metrics only for callers allowed `get` on the
workload's prometheus-metrics subresource (SubjectAccessReview). /healthz and /readyz pass
unauthenticated so the kubelet can probe through the proxy.
Usage: {{ include "gpu.kubeRbacProxy.sidecar" (dict "ctx" . "resource" "deployments" "name" "gpu-controller"
          "upstream" "127.0.0.1:8080" "port" 8443) }}
*/ -}}
{{- define "gpu.kubeRbacProxy.sidecar" -}}
- name: kube-rbac-proxy
  image: {{ include "helm_lib_module_common_image" (list .ctx "kubeRbacProxy") }}
  imagePullPolicy: IfNotPresent
  args:
  - "--secure-listen-address=$(KUBE_RBAC_PROXY_LISTEN_ADDRESS):{{ .port }}"
  - "--v=2"
  - "--logtostderr=true"
  - "--stale-cache-interval=1h30m"
  - "--livez-path=/livez"
  - "--tls-cert-file=/etc/kube-rbac-proxy/tls.crt"
  - "--tls-private-key-file=/etc/kube-rbac-proxy/tls.key"
  env:
  - name: KUBE_RBAC_PROXY_LISTEN_ADDRESS
    valueFrom:
      fieldRef:
        fieldPath: status.podIP
  - name: KUBE_RBAC_PROXY_CONFIG
    value: |
      excludePaths:
      - /healthz
      - /readyz
      upstreams:
      - upstream: http://{{ .upstream }}/metrics
        path: /metrics
        authorization:
          resourceAttributes:
            namespace: d8-{{ .ctx.Chart.Name }}
            apiGroup: apps
            apiVersion: v1
            resource: {{ .resource }}
            subresource: prometheus-metrics
            name: {{ .name }}
      {{- if not .noProbes }}
      - upstream: http://{{ .upstream }}/healthz
        path: /healthz
      - upstream: http://{{ .upstream }}/readyz
        path: /readyz
      {{- end }}
  ports:
  - containerPort: {{ .port }}
    name: https-metrics
    protocol: TCP
  livenessProbe:
    httpGet:
      path: /livez
      port: {{ .port }}
      scheme: HTTPS
  readinessProbe:
    httpGet:
      path: /livez
      port: {{ .port }}
      scheme: HTTPS
  {{- /* Its own non-root user even in a Pod that runs as root (gpu-handler). */}}
  {{- include "helm_lib_module_container_security_context_capabilities_drop_all_and_run_as_user_custom" (list .ctx 64535 64535) | nindent 2 }}
  resources:
    requests:
      {{- include "helm_lib_module_ephemeral_storage_only_logs" .ctx | nindent 6 }}
      {{- if not (has "vertical-pod-autoscaler" .ctx.Values.global.enabledModules) }}
      {{- include "helm_lib_container_kube_rbac_proxy_resources" .ctx | nindent 6 }}
      {{- end }}
  volumeMounts:
  - name: kube-rbac-proxy-tls
    mountPath: /etc/kube-rbac-proxy
    readOnly: true
{{- end -}}

{{- /* The volume the sidecar mounts. */ -}}
{{- define "gpu.kubeRbacProxy.volume" -}}
- name: kube-rbac-proxy-tls
  secret:
    secretName: gpu-metrics-tls
    items:
    - {key: tls.crt, path: tls.crt}
    - {key: tls.key, path: tls.key}
{{- end -}}
