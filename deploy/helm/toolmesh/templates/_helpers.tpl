{{/* Names, labels and the small computations the templates share. */}}

{{- define "toolmesh.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The object name prefix: release name, plus the chart name unless the
release name already contains it. Kept to 50 characters so suffixes such as
"-envoy-stats" still fit a 63-character DNS label. */}}
{{- define "toolmesh.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "toolmesh.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object; call with (dict "ctx" $ "component" "envoy"). */}}
{{- define "toolmesh.labels" -}}
helm.sh/chart: {{ include "toolmesh.chart" .ctx }}
{{ include "toolmesh.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: toolmesh
{{- end }}

{{/* Selector labels; call with (dict "ctx" $ "component" "envoy"). */}}
{{- define "toolmesh.selectorLabels" -}}
app.kubernetes.io/name: {{ include "toolmesh.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "toolmesh.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "toolmesh.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "toolmesh.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "toolmesh.envoyImage" -}}
{{- printf "%s:%s" .Values.envoy.image.repository .Values.envoy.image.tag }}
{{- end }}

{{/* Fully qualified names of the toolmesh Services (gateway mode). */}}
{{- define "toolmesh.extprocHost" -}}
{{- printf "%s-extproc.%s.svc.%s" (include "toolmesh.fullname" .) .Release.Namespace .Values.clusterDomain }}
{{- end }}

{{- define "toolmesh.xdsHost" -}}
{{- printf "%s-xds.%s.svc.%s" (include "toolmesh.fullname" .) .Release.Namespace .Values.clusterDomain }}
{{- end }}

{{/* The Envoy node cluster (--service-cluster). */}}
{{- define "toolmesh.nodeCluster" -}}
{{- default (printf "%s-%s" (include "toolmesh.fullname" .) .Values.mode) .Values.envoy.nodeCluster }}
{{- end }}

{{/* A Kubernetes memory quantity in bytes, when it is a whole number of
bytes, K, M, G, Ki, Mi or Gi; "" otherwise. */}}
{{- define "toolmesh.bytes" -}}
{{- $q := toString . }}
{{- $n := regexFind "^[0-9]+" $q }}
{{- $unit := trimPrefix $n $q }}
{{- $units := dict "" 1 "K" 1000 "M" 1000000 "G" 1000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 }}
{{- if and $n (hasKey $units $unit) }}
{{- mul (int64 $n) (get $units $unit) }}
{{- end }}
{{- end }}

{{/* Envoy's heap ceiling: envoy.overload.maxHeapBytes, or 80% of the memory
limit, leaving room for what the fixed_heap monitor does not count. */}}
{{- define "toolmesh.envoyHeapBytes" -}}
{{- if .Values.envoy.overload.maxHeapBytes }}
{{- int64 .Values.envoy.overload.maxHeapBytes }}
{{- else }}
{{- $limit := dig "limits" "memory" "" .Values.envoy.resources }}
{{- $bytes := include "toolmesh.bytes" $limit }}
{{- if not $bytes }}
{{- fail (printf "envoy.overload.maxHeapBytes is 0 and envoy.resources.limits.memory (%q) is not a whole number of bytes, K, M, G, Ki, Mi or Gi" (toString $limit)) }}
{{- end }}
{{- div (mul (int64 $bytes) 4) 5 }}
{{- end }}
{{- end }}

{{/* The Portal toolmesh reads: a URL, or the path of the mounted document. */}}
{{- define "toolmesh.portal" -}}
{{- if .Values.portal.url }}
{{- .Values.portal.url }}
{{- else if .Values.portal.existingConfigMap }}
{{- printf "/etc/toolmesh/portal/%s" .Values.portal.key }}
{{- else }}
{{- "/etc/toolmesh/portal/portal.yaml" }}
{{- end }}
{{- end }}

{{/* The ConfigMap holding the Portal document, if one is mounted. */}}
{{- define "toolmesh.portalConfigMap" -}}
{{- if not .Values.portal.url }}
{{- default (printf "%s-portal" (include "toolmesh.fullname" .)) .Values.portal.existingConfigMap }}
{{- end }}
{{- end }}

{{/* Checks of values that the schema cannot express. */}}
{{- define "toolmesh.validate" -}}
{{- $sources := 0 }}
{{- if .Values.portal.url }}{{ $sources = add1 $sources }}{{ end }}
{{- if .Values.portal.existingConfigMap }}{{ $sources = add1 $sources }}{{ end }}
{{- if and (eq $sources 0) (not .Values.portal.routes) }}
{{- fail "set one of portal.url, portal.existingConfigMap or portal.routes" }}
{{- end }}
{{- if gt $sources 1 }}
{{- fail "set only one of portal.url and portal.existingConfigMap" }}
{{- end }}
{{- if hasKey .Values.config "portal" }}
{{- fail "config.portal: use portal.url, portal.existingConfigMap or portal.routes" }}
{{- end }}
{{- range $k := list "listen" "extprocListen" "xdsListen" "adminListen" "envoyListen" "redis" }}
{{- if hasKey $.Values.config $k }}
{{- fail (printf "config.%s is set by the chart (ports.*, redis.*)" $k) }}
{{- end }}
{{- end }}
{{- range $k, $value := dict "notificationsListen" "notifications.enabled" "notificationsAddresses" "notifications.enabled" "notificationsMaxStreams" "notifications.maxStreams" "notificationsMaxStreamsPerClient" "notifications.maxStreamsPerClient" "notificationsKeepAlive" "notifications.keepAlive" "resourceBase" "resourceBase" "auth" "auth" "policies" "policies" "upstreamAuth" "upstreamAuth.services" "approval" "approval.*" "downstreamTLS" "downstreamTLS.*" "controlTLS" "controlTLS.*" "envoyControlTLS" "controlTLS.*" "insecureListeners" "controlTLS.*" }}
{{- if hasKey $.Values.config $k }}
{{- fail (printf "config.%s: use the chart value %s" $k $value) }}
{{- end }}
{{- end }}
{{- with .Values.upstreamAuth }}
{{- if and .credentials (not .existingSecret) }}
{{- fail "upstreamAuth.credentials needs upstreamAuth.existingSecret, the Secret holding them" }}
{{- end }}
{{- range $name, $key := .credentials }}
{{- if hasKey (default (dict) $.Values.config.credentials) $name }}
{{- fail (printf "credential %s is in both config.credentials and upstreamAuth.credentials" $name) }}
{{- end }}
{{- end }}
{{- end }}
{{- with .Values.controlTLS }}
{{- if or .existingSecret .envoyExistingSecret }}
{{- if not (and .existingSecret .envoyExistingSecret .clientSANs .serverSANs) }}
{{- fail "controlTLS needs existingSecret, envoyExistingSecret, clientSANs and serverSANs together" }}
{{- end }}
{{- if ne $.Values.mode "gateway" }}
{{- fail "controlTLS is for gateway mode; in sidecar mode the control listeners are on loopback" }}
{{- end }}
{{- end }}
{{- end }}
{{- with .Values.approval }}
{{- if and .keys (not .existingSecret) }}
{{- fail "approval.keys needs approval.existingSecret, the Secret holding the keys" }}
{{- end }}
{{- if and (or .routes .default .ttl) (not .keys) }}
{{- fail "approval.routes, approval.default and approval.ttl need approval.keys" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Where the chart mounts the Secrets the identity values name. */}}
{{- define "toolmesh.upstreamCredentialsDir" -}}/etc/toolmesh/upstream-credentials{{- end }}
{{- define "toolmesh.approvalKeysDir" -}}/etc/toolmesh/approval{{- end }}
{{- define "toolmesh.downstreamTLSDir" -}}/etc/envoy-tls{{- end }}
{{- define "toolmesh.controlTLSDir" -}}/etc/toolmesh/control-tls{{- end }}
{{- define "toolmesh.envoyControlTLSDir" -}}/etc/envoy-control-tls{{- end }}

{{/* "true" when the control channels are mTLS (gateway mode, controlTLS set). */}}
{{- define "toolmesh.controlTLS" -}}
{{- if and (eq .Values.mode "gateway") .Values.controlTLS.existingSecret }}true{{- end }}
{{- end }}

{{/* The config file fields the chart sets from its own values
(notifications, identity), as YAML. Secrets appear only as file paths. */}}
{{- define "toolmesh.configFromValues" -}}
{{- $v := .Values }}
{{- $out := dict }}
{{- if $v.notifications.enabled }}
{{- $host := ternary "127.0.0.1" (include "toolmesh.extprocHost" .) (eq $v.mode "sidecar") }}
{{- $_ := set $out "notificationsAddresses" (list (printf "%s:%d" $host (int $v.ports.notifications))) }}
{{- $_ := set $out "notificationsMaxStreams" (int64 $v.notifications.maxStreams) }}
{{- $_ := set $out "notificationsMaxStreamsPerClient" (int64 $v.notifications.maxStreamsPerClient) }}
{{- with $v.notifications.keepAlive }}
{{- $_ := set $out "notificationsKeepAlive" . }}
{{- end }}
{{- end }}
{{- with $v.resourceBase }}
{{- $_ := set $out "resourceBase" . }}
{{- end }}
{{- with $v.auth }}
{{- $_ := set $out "auth" . }}
{{- end }}
{{- with $v.policies }}
{{- $_ := set $out "policies" . }}
{{- end }}
{{- with $v.upstreamAuth.services }}
{{- $_ := set $out "upstreamAuth" . }}
{{- end }}
{{- with $v.upstreamAuth.credentials }}
{{- $creds := dict }}
{{- range $name, $key := . }}
{{- $_ := set $creds $name (dict "file" (printf "%s/%s" (include "toolmesh.upstreamCredentialsDir" $) $key)) }}
{{- end }}
{{- $_ := set $out "credentials" $creds }}
{{- end }}
{{- with $v.approval.keys }}
{{- $keys := list }}
{{- range . }}
{{- $keys = append $keys (dict "id" .id "file" (printf "%s/%s" (include "toolmesh.approvalKeysDir" $) .secretKey)) }}
{{- end }}
{{- $approval := dict "keys" $keys }}
{{- with $v.approval.ttl }}{{ $_ := set $approval "ttl" . }}{{ end }}
{{- with $v.approval.routes }}{{ $_ := set $approval "routes" . }}{{ end }}
{{- with $v.approval.default }}{{ $_ := set $approval "default" . }}{{ end }}
{{- $_ := set $out "approval" $approval }}
{{- end }}
{{- with $v.downstreamTLS.existingSecret }}
{{- $dir := include "toolmesh.downstreamTLSDir" $ }}
{{- $_ := set $out "downstreamTLS" (dict "certFile" (printf "%s/%s" $dir $v.downstreamTLS.certKey) "keyFile" (printf "%s/%s" $dir $v.downstreamTLS.keyKey) "clientCAFile" (printf "%s/%s" $dir $v.downstreamTLS.caKey)) }}
{{- end }}
{{- if include "toolmesh.controlTLS" . }}
{{- $c := $v.controlTLS }}
{{- $dir := include "toolmesh.controlTLSDir" $ }}
{{- $_ := set $out "controlTLS" (dict "certFile" (printf "%s/%s" $dir $c.certKey) "keyFile" (printf "%s/%s" $dir $c.keyKey) "clientCAFile" (printf "%s/%s" $dir $c.caKey) "allowedSANs" $c.clientSANs) }}
{{- $edir := include "toolmesh.envoyControlTLSDir" $ }}
{{- $_ := set $out "envoyControlTLS" (dict "certFile" (printf "%s/%s" $edir $c.certKey) "keyFile" (printf "%s/%s" $edir $c.keyKey) "caFile" (printf "%s/%s" $edir $c.caKey) "serverSANs" $c.serverSANs) }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/* The Secret volumes of a toolmesh container's identity values; call with
the root context. Only the keys the config file names are projected. */}}
{{- define "toolmesh.identityVolumes" -}}
{{- if include "toolmesh.controlTLS" . }}
- name: control-tls
  secret:
    secretName: {{ .Values.controlTLS.existingSecret }}
    items:
      {{- range $k := list .Values.controlTLS.certKey .Values.controlTLS.keyKey .Values.controlTLS.caKey | uniq }}
      - key: {{ $k }}
        path: {{ $k }}
      {{- end }}
{{- end }}
{{- if .Values.upstreamAuth.credentials }}
- name: upstream-credentials
  secret:
    secretName: {{ .Values.upstreamAuth.existingSecret }}
    items:
      {{- range $name, $key := .Values.upstreamAuth.credentials }}
      - key: {{ $key }}
        path: {{ $key }}
      {{- end }}
{{- end }}
{{- if .Values.approval.keys }}
- name: approval-keys
  secret:
    secretName: {{ .Values.approval.existingSecret }}
    items:
      {{- range .Values.approval.keys }}
      - key: {{ .secretKey }}
        path: {{ .secretKey }}
      {{- end }}
{{- end }}
{{- end }}

{{/* Their mounts. */}}
{{- define "toolmesh.identityMounts" -}}
{{- if include "toolmesh.controlTLS" . }}
# controlTLS: toolmesh re-reads these files when the Secret rotates.
- name: control-tls
  mountPath: {{ include "toolmesh.controlTLSDir" . }}
  readOnly: true
{{- end }}
{{- if .Values.upstreamAuth.credentials }}
- name: upstream-credentials
  mountPath: {{ include "toolmesh.upstreamCredentialsDir" . }}
  readOnly: true
{{- end }}
{{- if .Values.approval.keys }}
- name: approval-keys
  mountPath: {{ include "toolmesh.approvalKeysDir" . }}
  readOnly: true
{{- end }}
{{- end }}

{{/* Envoy's downstream TLS and control TLS Secret volumes. */}}
{{- define "toolmesh.downstreamTLSVolume" -}}
{{- if include "toolmesh.controlTLS" . }}
- name: envoy-control-tls
  secret:
    secretName: {{ .Values.controlTLS.envoyExistingSecret }}
    items:
      {{- range $k := list .Values.controlTLS.certKey .Values.controlTLS.keyKey .Values.controlTLS.caKey | uniq }}
      - key: {{ $k }}
        path: {{ $k }}
      {{- end }}
{{- end }}
{{- with .Values.downstreamTLS }}
{{- if .existingSecret }}
- name: downstream-tls
  secret:
    secretName: {{ .existingSecret }}
    items:
      {{- range $k := list .certKey .keyKey .caKey | uniq }}
      - key: {{ $k }}
        path: {{ $k }}
      {{- end }}
{{- end }}
{{- end }}
{{- end }}
