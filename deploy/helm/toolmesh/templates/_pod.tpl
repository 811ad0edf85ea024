{{/* Containers and pod fields shared by the Deployments. */}}

{{/* A toolmesh container. Call with (dict "ctx" $ "name" "extproc"
"command" "extproc" "grpcPort" 9002 "adminPort" 9090 "listen" "0.0.0.0"
"values" .Values.extproc). */}}
{{- define "toolmesh.container" -}}
{{- $ctx := .ctx }}
{{- $v := .values -}}
- name: {{ .name }}
  image: {{ include "toolmesh.image" $ctx }}
  imagePullPolicy: {{ $ctx.Values.image.pullPolicy }}
  args:
    - {{ .command }}
    - --config=/etc/toolmesh/config.yaml
    {{- if eq .command "extproc" }}
    - --extproc-listen={{ .listen }}:{{ .grpcPort }}
    {{- if $ctx.Values.notifications.enabled }}
    - --notifications-listen={{ .listen }}:{{ $ctx.Values.ports.notifications }}
    {{- end }}
    {{- else }}
    - --xds-listen={{ .listen }}:{{ .grpcPort }}
    - --envoy-listen=0.0.0.0:{{ $ctx.Values.ports.mcp }}
    {{- end }}
    - --admin-listen=0.0.0.0:{{ .adminPort }}
    {{- if and (ne .listen "127.0.0.1") (not (include "toolmesh.controlTLS" $ctx)) }}
    # Gateway mode: the control listeners are plaintext on the pod network
    # (toolmesh refuses that without this flag; docs/operators.md,
    # "Control channels").
    - --insecure-listeners=true
    {{- end }}
    {{- if or $ctx.Values.redis.existingSecret $ctx.Values.redis.url }}
    - --redis=$(TOOLMESH_REDIS_URL)
    {{- end }}
    {{- with $v.extraArgs }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  env:
    {{- if $ctx.Values.redis.existingSecret }}
    - name: TOOLMESH_REDIS_URL
      valueFrom:
        secretKeyRef:
          name: {{ $ctx.Values.redis.existingSecret }}
          key: {{ $ctx.Values.redis.existingSecretKey }}
    {{- else if $ctx.Values.redis.url }}
    - name: TOOLMESH_REDIS_URL
      value: {{ $ctx.Values.redis.url | quote }}
    {{- end }}
    {{- with dig "limits" "memory" "" $v.resources }}
    # The Go runtime collects garbage harder as its memory nears 90% of the
    # limit, instead of being OOM-killed.
    - name: GOMEMLIMIT
      {{- with include "toolmesh.bytes" . }}
      value: {{ div (mul (int64 .) 9) 10 | quote }}
      {{- else }}
      valueFrom:
        resourceFieldRef:
          containerName: {{ $.name }}
          resource: limits.memory
      {{- end }}
    {{- end }}
    {{- with $v.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    - name: {{ printf "grpc-%s" .command }}
      containerPort: {{ .grpcPort }}
      protocol: TCP
    - name: {{ .adminPortName }}
      containerPort: {{ .adminPort }}
      protocol: TCP
    {{- if and (eq .command "extproc") $ctx.Values.notifications.enabled }}
    - name: notifications
      containerPort: {{ $ctx.Values.ports.notifications }}
      protocol: TCP
    {{- end }}
  # Liveness asks only whether the process answers; readiness whether it has
  # a route snapshot and its gRPC server is SERVING (see docs/operators.md).
  livenessProbe:
    httpGet:
      path: /healthz
      port: {{ .adminPortName }}
    periodSeconds: 10
    timeoutSeconds: 2
    failureThreshold: 3
  readinessProbe:
    httpGet:
      path: /readyz
      port: {{ .adminPortName }}
    periodSeconds: 5
    timeoutSeconds: 2
    failureThreshold: 2
  resources:
    {{- toYaml $v.resources | nindent 4 }}
  securityContext:
    {{- toYaml $ctx.Values.securityContext | nindent 4 }}
  volumeMounts:
    - name: config
      mountPath: /etc/toolmesh/config.yaml
      subPath: config.yaml
      readOnly: true
    {{- if include "toolmesh.portalConfigMap" $ctx }}
    # A directory mount, not subPath, so Portal edits reach toolmesh live.
    - name: portal
      mountPath: /etc/toolmesh/portal
      readOnly: true
    {{- end }}
    {{- with include "toolmesh.identityMounts" $ctx }}
    {{- . | nindent 4 }}
    {{- end }}
{{- end }}

{{/* The Envoy container. Call with (dict "ctx" $). */}}
{{- define "toolmesh.envoyContainer" -}}
{{- $ctx := .ctx }}
{{- $v := $ctx.Values.envoy -}}
- name: envoy
  image: {{ include "toolmesh.envoyImage" $ctx }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  command: [/usr/local/bin/envoy]
  args:
    - --config-path=/etc/envoy/envoy.yaml
    # Each pod is its own xDS node.
    - --service-node=$(POD_NAME)
    - --service-cluster={{ include "toolmesh.nodeCluster" $ctx }}
    - --concurrency={{ $v.concurrency }}
    - --log-level={{ $v.logLevel }}
    {{- with $v.extraArgs }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  env:
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
  ports:
    - name: mcp
      containerPort: {{ $ctx.Values.ports.mcp }}
      protocol: TCP
    - name: stats
      containerPort: {{ $ctx.Values.ports.envoyStats }}
      protocol: TCP
  # /ready is 200 once Envoy has its listeners and clusters from xDS.
  readinessProbe:
    httpGet:
      path: /ready
      port: stats
    periodSeconds: 5
    timeoutSeconds: 2
    failureThreshold: 2
  livenessProbe:
    tcpSocket:
      port: stats
    periodSeconds: 10
    timeoutSeconds: 2
    failureThreshold: 3
  {{- if $v.preStopSleepSeconds }}
  lifecycle:
    preStop:
      sleep:
        seconds: {{ $v.preStopSleepSeconds }}
  {{- end }}
  resources:
    {{- toYaml $v.resources | nindent 4 }}
  securityContext:
    {{- toYaml $ctx.Values.securityContext | nindent 4 }}
  volumeMounts:
    - name: envoy-bootstrap
      mountPath: /etc/envoy
      readOnly: true
    {{- if $ctx.Values.downstreamTLS.existingSecret }}
    # downstreamTLS: Envoy reads these files itself and re-reads them when
    # the Secret rotates.
    - name: downstream-tls
      mountPath: {{ include "toolmesh.downstreamTLSDir" $ctx }}
      readOnly: true
    {{- end }}
    {{- if include "toolmesh.controlTLS" $ctx }}
    # controlTLS: Envoy's client certificate towards toolmesh, re-read by
    # Envoy when the Secret rotates.
    - name: envoy-control-tls
      mountPath: {{ include "toolmesh.envoyControlTLSDir" $ctx }}
      readOnly: true
    {{- end }}
{{- end }}

{{/* Pod fields shared by every Deployment. Call with (dict "ctx" $
"component" "envoy"). */}}
{{- define "toolmesh.podSpec" -}}
{{- $ctx := .ctx -}}
serviceAccountName: {{ include "toolmesh.serviceAccountName" $ctx }}
automountServiceAccountToken: false
securityContext:
  {{- toYaml $ctx.Values.podSecurityContext | nindent 2 }}
{{- with $ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $ctx.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $ctx.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $ctx.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $ctx.Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $ctx.Values.topologySpreadConstraints }}
{{- $constraints := list }}
{{- range . }}
{{- $constraints = append $constraints (merge (deepCopy .) (dict "labelSelector" (dict "matchLabels" (include "toolmesh.selectorLabels" $ | fromYaml)))) }}
{{- end }}
topologySpreadConstraints:
  {{- toYaml $constraints | nindent 2 }}
{{- end }}
{{- end }}

{{/* Pod metadata shared by every Deployment. Call with (dict "ctx" $
"component" "envoy" "checksums" (list ...)). */}}
{{- define "toolmesh.podMetadata" -}}
{{- $ctx := .ctx -}}
metadata:
  labels:
    {{- include "toolmesh.labels" . | nindent 4 }}
    {{- with $ctx.Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    {{- range $name, $sum := .checksums }}
    checksum/{{ $name }}: {{ $sum }}
    {{- end }}
    {{- with $ctx.Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}
