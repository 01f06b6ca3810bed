{{/*
Names, labels and the values every template shares.
*/}}

{{- define "toolwire.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "toolwire.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "toolwire.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels shared by every object; "component" is added per object. */}}
{{- define "toolwire.labels" -}}
helm.sh/chart: {{ include "toolwire.chart" . }}
app.kubernetes.io/name: {{ include "toolwire.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: toolwire
{{- end }}

{{- define "toolwire.selectorLabels" -}}
app.kubernetes.io/name: {{ include "toolwire.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "toolwire.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "toolwire.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* image: repository:tag or repository@digest of an image value. */}}
{{- define "toolwire.image" -}}
{{- $img := .image -}}
{{- if $img.digest -}}
{{ $img.repository }}@{{ $img.digest }}
{{- else -}}
{{ $img.repository }}:{{ $img.tag | default .root.Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/* The NATS URL the binaries dial: the bundled service or nats.url. */}}
{{- define "toolwire.natsURL" -}}
{{- if .Values.nats.bundled.enabled -}}
nats://{{ include "toolwire.fullname" . }}-nats.{{ .Release.Namespace }}.svc:4222
{{- else -}}
{{- required "nats.url is required unless nats.bundled.enabled (an external NATS cluster, e.g. nats://nats.nats.svc:4222)" .Values.nats.url -}}
{{- end -}}
{{- end }}

{{/*
host:port of the NATS monitoring endpoint KEDA's scaler reads. On a
cluster the scaler asks the stream leader, at "<server name>.<this host>":
so the headless service, with server names equal to pod names.
*/}}
{{- define "toolwire.natsMonitoring" -}}
{{- if .Values.nats.monitoring.endpoint -}}
{{ .Values.nats.monitoring.endpoint }}
{{- else if .Values.nats.bundled.enabled -}}
{{ include "toolwire.fullname" . }}-nats-headless.{{ .Release.Namespace }}.svc.cluster.local:8222
{{- else -}}
{{- fail "nats.monitoring.endpoint is required with autoscaling.keda.enabled and an external NATS (host:port of its monitoring endpoint)" -}}
{{- end -}}
{{- end }}

{{/* Stream names, as internal/bus derives them from the prefix. */}}
{{- define "toolwire.callsStream" -}}
{{ .Values.prefix | upper | replace "-" "_" }}_CALLS
{{- end }}

{{/*
pool: one pools[] entry over poolDefaults. A key the entry sets wins;
autoscaling and pdb merge one level deep, everything else (resources, env,
lists) is replaced whole. Unlike sprig's merge, false and 0 set by the
entry count. Returned as YAML; use with fromYaml.
*/}}
{{- define "toolwire.pool" -}}
{{- $m := deepCopy .root.Values.poolDefaults -}}
{{- range $k, $v := .pool -}}
{{- if and (has $k (list "autoscaling" "pdb")) (kindIs "map" $v) -}}
{{- $inner := deepCopy (get $m $k) -}}
{{- range $k2, $v2 := $v }}{{ $_ := set $inner $k2 $v2 }}{{ end -}}
{{- $_ := set $m $k $inner -}}
{{- else -}}
{{- $_ := set $m $k $v -}}
{{- end -}}
{{- end -}}
{{- toYaml $m -}}
{{- end }}

{{/* overlay: base with the keys of over set on it (one level), as YAML. */}}
{{- define "toolwire.overlay" -}}
{{- $m := deepCopy (.base | default dict) -}}
{{- range $k, $v := (.over | default dict) }}{{ $_ := set $m $k $v }}{{ end -}}
{{- toYaml $m -}}
{{- end }}

{{/*
poolConsumers: the durable consumer names of a pool, one per type, as
internal/bus and internal/workerconfig name them: "<prefix>_pool_<name>"
for a pool of one type, "<prefix>_pool_<name>-<type>" for each type of a
pool serving several. Returned as a YAML list.
*/}}
{{- define "toolwire.poolConsumers" -}}
{{- $prefix := .root.Values.prefix -}}
{{- $name := .pool.name -}}
{{- $types := .pool.types -}}
{{- if eq (len $types) 1 }}
- {{ printf "%s_pool_%s" $prefix $name }}
{{- else }}
{{- range $types }}
- {{ printf "%s_pool_%s-%s" $prefix $name . }}
{{- end }}
{{- end }}
{{- end }}

{{/* Checks of a merged pool that the schema cannot express. */}}
{{- define "toolwire.checkPool" -}}
{{- $p := .pool -}}
{{- if lt (int $p.graceSeconds) (int $p.longestToolTimeoutSeconds) -}}
{{- fail (printf "pools[%s]: graceSeconds (%v) must be at least longestToolTimeoutSeconds (%v): a stop would cut the longest tool short" $p.name $p.graceSeconds $p.longestToolTimeoutSeconds) -}}
{{- end -}}
{{- if le (int $p.terminationGracePeriodSeconds) (add (int $p.preStopSeconds) (int $p.graceSeconds)) -}}
{{- fail (printf "pools[%s]: terminationGracePeriodSeconds (%v) must exceed preStopSeconds + graceSeconds (%v): the kubelet would kill in-flight calls" $p.name $p.terminationGracePeriodSeconds (add (int $p.preStopSeconds) (int $p.graceSeconds))) -}}
{{- end -}}
{{- /* The pool consumer's MaxAckPending (internal/bus: 1024) caps the
calls delivered at once across all replicas: slots beyond it stay idle. */ -}}
{{- $slots := int $p.concurrency | default 64 -}}
{{- $most := ternary (int $p.autoscaling.maxReplicas) (int $p.replicas) (and $p.autoscaling.enabled true) -}}
{{- if gt (mul $slots $most) 1024 -}}
{{- fail (printf "pools[%s]: %d replicas × %d slots exceed the pool consumer's MaxAckPending (1024): the extra slots would never get a call; lower the replicas or the concurrency" $p.name $most $slots) -}}
{{- end -}}
{{- if and $p.autoscaling.enabled (lt (int $p.autoscaling.maxReplicas) (int $p.autoscaling.minReplicas)) -}}
{{- fail (printf "pools[%s]: autoscaling.maxReplicas must be at least minReplicas" $p.name) -}}
{{- end -}}
{{- if and $p.autoscaling.enabled (eq (int $p.autoscaling.minReplicas) 0) (not .root.Values.autoscaling.keda.enabled) -}}
{{- fail (printf "pools[%s]: autoscaling.minReplicas 0 needs autoscaling.keda.enabled (an HPA cannot scale to zero)" $p.name) -}}
{{- end -}}
{{- end }}

{{/*
A pool's NATS role (bus.PoolRole): "pool-<name>", whose permissions reach
that pool's consumers only (toolwire.natsPoolPermissions). Takes the
pool's name.
*/}}
{{- define "toolwire.poolRole" -}}
pool-{{ . }}
{{- end }}

{{/* The environment variable of a pool role's password on the NATS servers. */}}
{{- define "toolwire.poolPasswordEnv" -}}
TOOLWIRE_NATS_POOL_{{ . | upper | replace "-" "_" }}_PASSWORD
{{- end }}

{{/* The Secret of the bundled NATS's passwords and credentials files. */}}
{{- define "toolwire.natsAuthSecret" -}}
{{ include "toolwire.fullname" . }}-nats-auth
{{- end }}

{{/*
The Secret of the pools' signing keys, one Ed25519 private key per pool
under "<pool name>.pem": signing.existingSecret, or the one the chart makes
(templates/signing-keys-secret.yaml). A pool's workers mount their own
pool's key (--signing-key), the dispatchers the whole Secret
(--worker-keys).
*/}}
{{- define "toolwire.signingKeysSecret" -}}
{{- if .Values.signing.existingSecret -}}
{{ .Values.signing.existingSecret }}
{{- else -}}
{{ include "toolwire.fullname" . }}-signing-keys
{{- end -}}
{{- end }}

{{/*
Volume, mount and flag of a role's NATS credentials file (--nats-creds):
with the bundled NATS, the role's file in its auth Secret ("dispatcher",
or a pool's role "pool-<name>"); with an external one, nats.credentials:
a pool's entry of poolKeys, else workerKey, else key. Takes (dict "root" $
"role" ROLE).
*/}}
{{- define "toolwire.natsCredsVolume" -}}
{{- $n := .root.Values.nats }}
{{- if $n.bundled.enabled }}
- name: nats-creds
  secret:
    secretName: {{ include "toolwire.natsAuthSecret" .root }}
    defaultMode: 0440
    items:
      - key: {{ .role }}.creds
        path: nats.creds
{{- else if $n.credentials.existingSecret }}
- name: nats-creds
  secret:
    secretName: {{ $n.credentials.existingSecret }}
    defaultMode: 0440
    items:
      {{- $key := $n.credentials.key }}
      {{- if hasPrefix "pool-" .role }}
      {{- $key = get ($n.credentials.poolKeys | default dict) (trimPrefix "pool-" .role) | default $n.credentials.workerKey | default $n.credentials.key }}
      {{- else if and (eq .role "worker") $n.credentials.workerKey }}
      {{- $key = $n.credentials.workerKey }}
      {{- end }}
      - key: {{ $key }}
        path: nats.creds
{{- end }}
{{- end }}

{{- define "toolwire.natsCredsMount" -}}
{{- if or .root.Values.nats.bundled.enabled .root.Values.nats.credentials.existingSecret }}
- name: nats-creds
  mountPath: /etc/toolwire/nats
  readOnly: true
{{- end }}
{{- end }}

{{- define "toolwire.natsCredsArg" -}}
{{- if or .root.Values.nats.bundled.enabled .root.Values.nats.credentials.existingSecret }}
- --nats-creds=/etc/toolwire/nats/nats.creds
{{- end }}
{{- end }}

{{/*
toolwire.flagMap renders a map as the value of a flag that takes
key=value pairs (--pool-max-backlog, --pool-max-queue-wait,
--stream-max-bytes): sorted by key,
comma-separated; whole numbers are printed as integers (a YAML number
reaches templates as a float, and 1000000 would print as 1e+06).
*/}}
{{- define "toolwire.flagMap" -}}
{{- $m := . -}}
{{- $pairs := list -}}
{{- range $k := keys $m | sortAlpha -}}
{{- $v := index $m $k -}}
{{- if kindIs "string" $v -}}
{{- $pairs = append $pairs (printf "%s=%s" $k $v) -}}
{{- else -}}
{{- $pairs = append $pairs (printf "%s=%d" $k (int64 $v)) -}}
{{- end -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}
