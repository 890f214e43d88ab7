{{- /*
The kube-rbac-proxy sidecar in front of a component's HTTP server (probes and, later, /metrics).
The component binds 127.0.0.1 only; the proxy serves TLS (certificate from the tls-certificates hook,
Secret gpu-metrics-tls) and lets through /metrics only for callers allowed `get` on the workload's
prometheus-metrics subresource (SubjectAccessReview). /healthz and /readyz pass unauthenticated so the
kubelet can probe through the proxy.
Usage: {{ include "gpu.kubeRbacProxy.sidecar" (dict "ctx" . "resource" "deployments" "name" "gpu-controller"
          "upstream" "127.0.0.1:8080" "port" 8443) }}
*/ -}}
{{- define "gpu.kubeRbacProxy.sidecar" -}}
- name: kube-rbac-proxy
  image: {{ include "gpu.commonImage" (list .ctx "kubeRbacProxy") }}
  imagePullPolicy: IfNotPresent
  args:
  - "--secure-listen-address=$(KUBE_RBAC_PROXY_LISTEN_ADDRESS):{{ .port }}"
  - "--v=2"
  - "--logtostderr=true"
  - "--stale-cache-interval=1h30m"
  - "--livez-path=/livez"
  - "--tls-cert-file=/var/lib/kube-rbac-proxy/tls/tls.crt"
  - "--tls-private-key-file=/var/lib/kube-rbac-proxy/tls/tls.key"
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
            namespace: d8-gpu
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
  securityContext:
    readOnlyRootFilesystem: true
    allowPrivilegeEscalation: false
    runAsNonRoot: true
    runAsUser: 64535
    runAsGroup: 64535
    capabilities:
      drop: ["ALL"]
    seccompProfile:
      type: RuntimeDefault
  resources:
    requests:
      ephemeral-storage: 50Mi
      {{- if not (has "vertical-pod-autoscaler-crd" .ctx.Values.global.enabledModules) }}
      cpu: 10m
      memory: 25Mi
      {{- end }}
  volumeMounts:
  - name: kube-rbac-proxy-tls
    mountPath: /var/lib/kube-rbac-proxy/tls
    readOnly: true
{{- end -}}

{{- /* The volume the sidecar mounts. */ -}}
{{- define "gpu.kubeRbacProxy.volume" -}}
- name: kube-rbac-proxy-tls
  secret:
    secretName: gpu-metrics-tls
{{- end -}}

{{- /* VPA bounds of the sidecar. */ -}}
{{- define "gpu.kubeRbacProxy.vpaBounds" -}}
{{- dict "name" "kube-rbac-proxy" "min" (dict "cpu" "10m" "memory" "25Mi") "max" (dict "cpu" "20m" "memory" "50Mi") | toJson -}}
{{- end -}}
