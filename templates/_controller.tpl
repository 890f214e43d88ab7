{{- /*
A cluster-wide controller of the module: a Deployment on the control-plane nodes (two replicas with
leader election when high availability is on), its PodDisruptionBudget and VPA, and its metrics
behind kube-rbac-proxy (a headless Service and, with the Prometheus operator, a ServiceMonitor).
gpu-controller and gpu-dra-controller differ only in what the arguments name.
Usage: {{ include "gpu.controller" (dict "ctx" . "name" "gpu-dra-controller" "image" "gpuDraController"
         "env" (list (dict "name" "X" "value" "y")) "resources" (dict "cpu" "10m" "memory" "50Mi")
         "maxResources" (dict "cpu" "200m" "memory" "256Mi")) }}
With "admissionWebhook" true the controller also serves the admission webhook on port 9443 (HTTPS,
the certificate of Secret gpu-dra-controller-webhook-tls).
*/ -}}
{{- define "gpu.controller" -}}
{{- $ctx := .ctx -}}
{{- $name := .name -}}
{{- $ha := not (empty (include "helm_lib_ha_enabled" $ctx)) -}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  namespace: d8-{{ $ctx.Chart.Name }}
  {{- include "helm_lib_module_labels" (list $ctx (dict "app" $name)) | nindent 2 }}
spec:
  replicas: {{ include "helm_lib_is_ha_to_value" (list $ctx 2 1) }}
  revisionHistoryLimit: 2
  {{- if $ha }}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 0
      maxUnavailable: 1
  {{- end }}
  selector:
    matchLabels:
      app: {{ $name }}
  template:
    metadata:
      labels:
        app: {{ $name }}
      annotations:
        checksum/tls: {{ include (print $ctx.Template.BasePath "/tls-secrets.yaml") $ctx | sha256sum }}
    spec:
      {{- include "gpu.imagePullSecrets" $ctx | nindent 6 }}
      {{- include "helm_lib_priority_class" (tuple $ctx "system-cluster-critical") | nindent 6 }}
      serviceAccountName: {{ $name }}
      {{- include "gpu.controlPlanePlacement" $ctx | nindent 6 }}
      {{- include "helm_lib_pod_anti_affinity_for_ha" (list $ctx (dict "app" $name)) | nindent 6 }}
      {{- include "helm_lib_module_pod_security_context_run_as_user_deckhouse" $ctx | nindent 6 }}
      containers:
      - name: {{ $name }}
        image: {{ include "helm_lib_module_image" (list $ctx .image) }}
        imagePullPolicy: IfNotPresent
        env:
        - name: LOG_LEVEL
          value: {{ $ctx.Values.gpu.logLevel | quote }}
        - name: HEALTH_ADDR
          value: "127.0.0.1:8080"
        - name: LEADER_ELECTION
          value: {{ $ha | quote }}
        {{- range .env }}
        - name: {{ .name }}
          value: {{ .value | quote }}
        {{- end }}
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        {{- if .admissionWebhook }}
        - name: WEBHOOK_CERT_DIR
          value: /etc/gpu-webhook
        - name: WEBHOOK_ADDR
          value: "0.0.0.0:9443"
        ports:
        - name: https-webhook
          containerPort: 9443
          protocol: TCP
        volumeMounts:
        - name: webhook-tls
          mountPath: /etc/gpu-webhook
          readOnly: true
        {{- end }}
        # The health server listens on loopback only: the kubelet probes it through kube-rbac-proxy,
        # by the sidecar's port number (a named port resolves in the probed container only).
        livenessProbe:
          httpGet:
            path: /healthz
            port: 8443
            scheme: HTTPS
          periodSeconds: 10
          failureThreshold: 3
        readinessProbe:
          httpGet:
            path: /readyz
            port: 8443
            scheme: HTTPS
          periodSeconds: 5
        {{- include "helm_lib_module_container_security_context_read_only_root_filesystem_capabilities_drop_all_pss_restricted" $ctx | nindent 8 }}
        {{- include "gpu.resources" (list $ctx .resources) | nindent 8 }}
      {{- include "gpu.kubeRbacProxy.sidecar" (dict "ctx" $ctx "resource" "deployments" "name" $name "upstream" "127.0.0.1:8080" "port" 8443) | nindent 6 }}
      volumes:
      {{- include "gpu.kubeRbacProxy.volume" $ctx | nindent 6 }}
      {{- if .admissionWebhook }}
      - name: webhook-tls
        secret:
          secretName: gpu-dra-controller-webhook-tls
          items:
          - {key: tls.crt, path: tls.crt}
          - {key: tls.key, path: tls.key}
      {{- end }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $name }}
  namespace: d8-{{ $ctx.Chart.Name }}
  {{- include "helm_lib_module_labels" (list $ctx (dict "app" $name)) | nindent 2 }}
spec:
  minAvailable: {{ include "helm_lib_is_ha_to_value" (list $ctx 1 0) }}
  selector:
    matchLabels:
      app: {{ $name }}
{{- include "gpu.vpa" (list $ctx "Deployment" $name (list (dict "name" $name "min" .resources "max" .maxResources)) true) }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}-metrics
  namespace: d8-{{ $ctx.Chart.Name }}
  {{- include "helm_lib_module_labels" (list $ctx (dict "app" $name)) | nindent 2 }}
spec:
  clusterIP: None
  selector:
    app: {{ $name }}
  ports:
  - name: https-metrics
    port: 8443
    targetPort: https-metrics
    protocol: TCP
{{- if has "operator-prometheus" $ctx.Values.global.enabledModules }}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ $name }}
  namespace: d8-monitoring
  {{- include "helm_lib_module_labels" (list $ctx (dict "prometheus" "main")) | nindent 2 }}
spec:
  jobLabel: app
  namespaceSelector:
    matchNames: [d8-{{ $ctx.Chart.Name }}]
  selector:
    matchLabels:
      app: {{ $name }}
  endpoints:
  - port: https-metrics
    scheme: https
    path: /metrics
    bearerTokenSecret:
      name: prometheus-token
      key: token
    tlsConfig:
      insecureSkipVerify: true
    honorLabels: true
    relabelings:
    - regex: endpoint|namespace|pod|service
      action: labeldrop
    - targetLabel: tier
      replacement: cluster
{{- end }}
{{- end -}}
