{{- /*
A cluster-wide controller of the module: a Deployment on the control-plane nodes (two replicas with
leader election when high availability is on), its PodDisruptionBudget and VPA, and its metrics
behind kube-rbac-proxy (a headless Service and, with the Prometheus operator, a ServiceMonitor).
gpu-controller and gpu-dra-controller differ only in what the arguments name.
Usage: {{ include "gpu.controller" (dict "ctx" . "name" "gpu-dra-controller" "image" "gpuDraController"
         "env" (list (dict "name" "X" "value" "y")) "resources" (dict "cpu" "10m" "memory" "50Mi")
         "maxResources" (dict "cpu" "200m" "memory" "256Mi")) }}
*/ -}}
{{- define "gpu.controller" -}}
{{- $ctx := .ctx -}}
{{- $name := .name -}}
{{- $ha := eq (include "gpu.haEnabled" $ctx) "true" -}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  namespace: d8-gpu
  {{- include "gpu.labels" (list $ctx (dict "app" $name)) | nindent 2 }}
spec:
  replicas: {{ ternary 2 1 $ha }}
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
      {{- include "gpu.podCommon" (list $ctx "system-cluster-critical") | nindent 6 }}
      serviceAccountName: {{ $name }}
      {{- include "gpu.controlPlanePlacement" $ctx | nindent 6 }}
      {{- if $ha }}
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - topologyKey: kubernetes.io/hostname
            labelSelector:
              matchLabels:
                app: {{ $name }}
      {{- end }}
      securityContext:
        runAsNonRoot: true
        runAsUser: 64535
        runAsGroup: 64535
        seccompProfile:
          type: RuntimeDefault
      containers:
      - name: {{ $name }}
        image: {{ include "gpu.image" (list $ctx .image) }}
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
        # The health server listens on loopback only: the kubelet probes it through kube-rbac-proxy.
        livenessProbe:
          httpGet:
            path: /healthz
            port: https-metrics
            scheme: HTTPS
          periodSeconds: 10
          failureThreshold: 3
        readinessProbe:
          httpGet:
            path: /readyz
            port: https-metrics
            scheme: HTTPS
          periodSeconds: 5
        securityContext:
          readOnlyRootFilesystem: true
          allowPrivilegeEscalation: false
          capabilities:
            drop: ["ALL"]
        resources:
          requests:
            ephemeral-storage: 50Mi
            {{- if not (has "vertical-pod-autoscaler-crd" $ctx.Values.global.enabledModules) }}
            cpu: {{ .resources.cpu }}
            memory: {{ .resources.memory }}
            {{- end }}
      {{- include "gpu.kubeRbacProxy.sidecar" (dict "ctx" $ctx "resource" "deployments" "name" $name "upstream" "127.0.0.1:8080" "port" 8443) | nindent 6 }}
      volumes:
      {{- include "gpu.kubeRbacProxy.volume" $ctx | nindent 6 }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $name }}
  namespace: d8-gpu
  {{- include "gpu.labels" (list $ctx (dict "app" $name)) | nindent 2 }}
spec:
  minAvailable: {{ ternary 1 0 $ha }}
  selector:
    matchLabels:
      app: {{ $name }}
{{- include "gpu.vpa" (list $ctx "Deployment" $name (list
      (dict "name" $name "min" .resources "max" .maxResources)
      (include "gpu.kubeRbacProxy.vpaBounds" $ctx | fromJson))) }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}-metrics
  namespace: d8-gpu
  {{- include "gpu.labels" (list $ctx (dict "app" $name)) | nindent 2 }}
spec:
  clusterIP: None
  selector:
    app: {{ $name }}
  ports:
  - name: https-metrics
    port: 8443
    targetPort: https-metrics
    protocol: TCP
{{- if has "operator-prometheus-crd" $ctx.Values.global.enabledModules }}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ $name }}
  namespace: d8-monitoring
  {{- include "gpu.labels" (list $ctx (dict "prometheus" "main")) | nindent 2 }}
spec:
  jobLabel: app
  namespaceSelector:
    matchNames: [d8-gpu]
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
