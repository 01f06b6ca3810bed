{{/*
The pod template of a worker pool, shared by its Deployment and its
ensure Job. Takes (dict "root" $ "p" <merged pool> "ensure" bool).
*/}}
{{- define "toolwire.poolPodSpec" -}}
{{- $root := .root -}}
{{- $p := .p -}}
{{- $hasConfig := or $p.config $p.specs -}}
serviceAccountName: {{ include "toolwire.serviceAccountName" $root }}
automountServiceAccountToken: false
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if hasKey $p "hostUsers" }}
hostUsers: {{ $p.hostUsers }}
{{- end }}
securityContext:
  {{- include "toolwire.overlay" (dict "base" $root.Values.podSecurityContext "over" $p.podSecurityContext) | nindent 2 }}
{{- if .ensure }}
restartPolicy: OnFailure
{{- else }}
terminationGracePeriodSeconds: {{ $p.terminationGracePeriodSeconds }}
{{- end }}
containers:
  - name: worker
    image: {{ include "toolwire.image" (dict "image" (include "toolwire.overlay" (dict "base" $root.Values.image "over" $p.image) | fromYaml) "root" $root) }}
    imagePullPolicy: {{ ($p.image | default dict).pullPolicy | default $root.Values.image.pullPolicy }}
    command:
      {{- toYaml $p.command | nindent 6 }}
    args:
      - --nats-url={{ include "toolwire.natsURL" $root }}
      {{- with include "toolwire.natsCredsArg" (dict "root" $root "role" (include "toolwire.poolRole" $p.name)) | trim }}{{ . | nindent 6 }}{{ end }}
      - --prefix={{ $root.Values.prefix }}
      - --stream-replicas={{ $root.Values.streamReplicas }}
      - --pool={{ $p.name }}
      - --pools={{ join "," $p.types }}
      - --signing-key=/etc/toolwire/signing/{{ $p.name }}.pem
      {{- if $hasConfig }}
      - --config=/etc/toolwire/worker/worker.yaml
      {{- end }}
      {{- if gt (int $p.concurrency) 0 }}
      - --concurrency={{ $p.concurrency }}
      {{- end }}
      - --ack-wait={{ $p.ackWaitSeconds }}s
      - --max-deliver={{ $p.maxDeliver }}
      - --grace={{ $p.graceSeconds }}s
      - --log-level={{ $p.logLevel }}
      {{- if .ensure }}
      - --ensure-only
      {{- else }}
      - --http=:{{ $p.httpPort }}
      {{- end }}
      {{- with $p.extraArgs }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    {{- with $p.env }}
    env:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with $p.envFrom }}
    envFrom:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- if not .ensure }}
    ports:
      - name: http
        containerPort: {{ $p.httpPort }}
        protocol: TCP
    startupProbe:
      httpGet:
        path: /healthz
        port: http
      periodSeconds: 2
      failureThreshold: 60
    livenessProbe:
      httpGet:
        path: /healthz
        port: http
      periodSeconds: 10
      failureThreshold: 3
    readinessProbe:
      httpGet:
        path: /readyz
        port: http
      periodSeconds: 5
      failureThreshold: 2
    {{- if gt (int $p.preStopSeconds) 0 }}
    lifecycle:
      preStop:
        # Then SIGTERM: the worker stops fetching, lets in-flight calls
        # finish within --grace, hands the rest back (Nak, no delay) for
        # another replica and drains its connection.
        sleep:
          seconds: {{ $p.preStopSeconds }}
    {{- end }}
    {{- end }}
    resources:
      {{- toYaml $p.resources | nindent 6 }}
    securityContext:
      {{- include "toolwire.overlay" (dict "base" $root.Values.securityContext "over" $p.securityContext) | nindent 6 }}
    volumeMounts:
      - name: tmp
        mountPath: /tmp
      {{- if $hasConfig }}
      - name: config
        mountPath: /etc/toolwire/worker
        readOnly: true
      {{- end }}
      {{- with include "toolwire.natsCredsMount" (dict "root" $root "role" (include "toolwire.poolRole" $p.name)) | trim }}{{ . | nindent 6 }}{{ end }}
      - name: signing-key
        mountPath: /etc/toolwire/signing
        readOnly: true
      {{- with $p.extraVolumeMounts }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
volumes:
  - name: tmp
    emptyDir:
      sizeLimit: {{ $root.Values.tmpSize }}
  {{- if $hasConfig }}
  - name: config
    configMap:
      name: {{ include "toolwire.poolName" (dict "root" $root "p" $p) }}
      items:
        - key: worker.yaml
          path: worker.yaml
        {{- range $file, $_ := $p.specs }}
        - key: spec.{{ $file }}
          path: specs/{{ $file }}
        {{- end }}
  {{- end }}
  {{- with include "toolwire.natsCredsVolume" (dict "root" $root "role" (include "toolwire.poolRole" $p.name)) | trim }}{{ . | nindent 2 }}{{ end }}
  # Only this pool's signing key (toolwire.signingKeysSecret).
  - name: signing-key
    secret:
      secretName: {{ include "toolwire.signingKeysSecret" $root }}
      defaultMode: 0400
      items:
        - key: {{ $p.name }}.pem
          path: {{ $p.name }}.pem
  {{- with $p.extraVolumes }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with $p.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $p.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $p.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if not .ensure }}
{{- with $p.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{- end }}

{{/* Name of a pool's objects. */}}
{{- define "toolwire.poolName" -}}
{{- printf "%s-pool-%s" (include "toolwire.fullname" .root) .p.name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels of a pool's pods. */}}
{{- define "toolwire.poolSelectorLabels" -}}
{{ include "toolwire.selectorLabels" .root }}
app.kubernetes.io/component: worker
toolwire.dev/pool: {{ .p.name }}
{{- end }}

{{/* The worker YAML of a pool: its config, tools defaulting to specs/. */}}
{{- define "toolwire.poolConfig" -}}
{{- $cfg := deepCopy (.p.config | default dict) -}}
{{- if and .p.specs (not (hasKey $cfg "tools")) -}}
{{- $_ := set $cfg "tools" (list "specs") -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end }}

{{/* True when a pool may scale to zero and so needs the ensure Job. */}}
{{- define "toolwire.poolScalesToZero" -}}
{{- if and .root.Values.autoscaling.keda.enabled .p.autoscaling.enabled (eq (int .p.autoscaling.minReplicas) 0) -}}
true
{{- end -}}
{{- end }}
