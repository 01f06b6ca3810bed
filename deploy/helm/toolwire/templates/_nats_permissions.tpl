{{/*
NATS permissions of the worker and operator roles, for the installation's
prefix: the same lists as bus.RolePermissions in internal/bus/auth.go (a
Go test, TestChartPermissionsMatch, compares them). docs/reliability.md
("NATS permission table") says what each entry is for. The dispatcher has
every permission.
*/}}
{{- define "toolwire.natsWorkerPermissions" -}}
{{- $p := .Values.prefix -}}
{{- $u := .Values.prefix | upper | replace "-" "_" -}}
{
  publish: {allow: [
    "$JS.API.STREAM.INFO.{{ $u }}_CALLS"
    "$JS.API.STREAM.INFO.{{ $u }}_RESULTS"
    "$JS.API.STREAM.INFO.{{ $u }}_EVENTS"
    "$JS.API.STREAM.INFO.{{ $u }}_DLQ"
    "$JS.API.STREAM.INFO.{{ $u }}_RETRIES"
    "$JS.API.STREAM.INFO.{{ $u }}_ADVISORIES"
    "$JS.API.STREAM.INFO.KV_{{ $p }}_cancels"
    "$JS.API.STREAM.INFO.KV_{{ $p }}_idempotency"
    "$JS.API.STREAM.INFO.KV_{{ $p }}_registry"
    "$JS.API.STREAM.INFO.KV_{{ $p }}_sessions"
    "$JS.API.STREAM.INFO.KV_{{ $p }}_policies"
    "$JS.API.STREAM.INFO.KV_{{ $p }}_approvals"
    "$JS.API.STREAM.INFO.KV_{{ $p }}_limits"
    "$JS.API.STREAM.INFO.OBJ_{{ $p }}_blobs"
    "$JS.API.CONSUMER.LIST.{{ $u }}_CALLS"
    "$JS.API.CONSUMER.CREATE.{{ $u }}_CALLS.*"
    "$JS.API.CONSUMER.CREATE.{{ $u }}_CALLS.*.{{ $p }}.call.>"
    "$JS.API.CONSUMER.CREATE.{{ $u }}_CALLS.*.{{ $p }}.shadow.>"
    "$JS.API.CONSUMER.INFO.{{ $u }}_CALLS.*"
    "$JS.API.CONSUMER.MSG.NEXT.{{ $u }}_CALLS.*"
    "$JS.ACK.{{ $u }}_CALLS.>"
    "$JS.API.DIRECT.GET.{{ $u }}_RESULTS.>"
    "$JS.API.DIRECT.GET.{{ $u }}_EVENTS"
    "$JS.API.DIRECT.GET.{{ $u }}_EVENTS.>"
    "$JS.API.STREAM.MSG.GET.{{ $u }}_RESULTS"
    "$JS.API.STREAM.MSG.GET.{{ $u }}_EVENTS"
    "{{ $p }}.result.>"
    "{{ $p }}.event.>"
    "{{ $p }}.dlq.>"
    "{{ $p }}.retry.sched.>"
    "$JS.API.DIRECT.GET.KV_{{ $p }}_cancels.>"
    "$JS.API.DIRECT.GET.KV_{{ $p }}_registry.>"
    "$KV.{{ $p }}_registry.>"
    "$JS.API.STREAM.MSG.GET.KV_{{ $p }}_approvals"
    "{{ $p }}.hook.after"
    "$O.{{ $p }}_blobs.>"
    "$JS.API.DIRECT.GET.OBJ_{{ $p }}_blobs.>"
  ]}
  subscribe: {allow: [
    "_INBOX_{{ $p }}_worker.>"
    "$KV.{{ $p }}_cancels.>"
    "$KV.{{ $p }}_registry.approvals.>"
  ]}
}
{{- end }}

{{- define "toolwire.natsOperatorPermissions" -}}
{{- $p := .Values.prefix -}}
{{- $u := .Values.prefix | upper | replace "-" "_" -}}
{
  publish: {allow: [
    "$JS.API.INFO"
    "$JS.API.STREAM.NAMES"
    "$JS.API.STREAM.LIST"
    "$JS.API.STREAM.INFO.{{ $u }}_CALLS"
    "$JS.API.CONSUMER.NAMES.{{ $u }}_CALLS"
    "$JS.API.CONSUMER.LIST.{{ $u }}_CALLS"
    "$JS.API.CONSUMER.INFO.{{ $u }}_CALLS.*"
    "$JS.API.STREAM.INFO.{{ $u }}_RESULTS"
    "$JS.API.CONSUMER.NAMES.{{ $u }}_RESULTS"
    "$JS.API.CONSUMER.LIST.{{ $u }}_RESULTS"
    "$JS.API.CONSUMER.INFO.{{ $u }}_RESULTS.*"
    "$JS.API.STREAM.INFO.{{ $u }}_EVENTS"
    "$JS.API.CONSUMER.NAMES.{{ $u }}_EVENTS"
    "$JS.API.CONSUMER.LIST.{{ $u }}_EVENTS"
    "$JS.API.CONSUMER.INFO.{{ $u }}_EVENTS.*"
    "$JS.API.STREAM.INFO.{{ $u }}_DLQ"
    "$JS.API.CONSUMER.NAMES.{{ $u }}_DLQ"
    "$JS.API.CONSUMER.LIST.{{ $u }}_DLQ"
    "$JS.API.CONSUMER.INFO.{{ $u }}_DLQ.*"
    "$JS.API.STREAM.INFO.{{ $u }}_RETRIES"
    "$JS.API.CONSUMER.NAMES.{{ $u }}_RETRIES"
    "$JS.API.CONSUMER.LIST.{{ $u }}_RETRIES"
    "$JS.API.CONSUMER.INFO.{{ $u }}_RETRIES.*"
    "$JS.API.STREAM.INFO.{{ $u }}_ADVISORIES"
    "$JS.API.CONSUMER.NAMES.{{ $u }}_ADVISORIES"
    "$JS.API.CONSUMER.LIST.{{ $u }}_ADVISORIES"
    "$JS.API.CONSUMER.INFO.{{ $u }}_ADVISORIES.*"
    "$JS.API.STREAM.INFO.KV_{{ $p }}_cancels"
    "$JS.API.CONSUMER.NAMES.KV_{{ $p }}_cancels"
    "$JS.API.CONSUMER.LIST.KV_{{ $p }}_cancels"
    "$JS.API.CONSUMER.INFO.KV_{{ $p }}_cancels.*"
    "$JS.API.STREAM.INFO.KV_{{ $p }}_idempotency"
    "$JS.API.CONSUMER.NAMES.KV_{{ $p }}_idempotency"
    "$JS.API.CONSUMER.LIST.KV_{{ $p }}_idempotency"
    "$JS.API.CONSUMER.INFO.KV_{{ $p }}_idempotency.*"
    "$JS.API.STREAM.INFO.KV_{{ $p }}_registry"
    "$JS.API.CONSUMER.NAMES.KV_{{ $p }}_registry"
    "$JS.API.CONSUMER.LIST.KV_{{ $p }}_registry"
    "$JS.API.CONSUMER.INFO.KV_{{ $p }}_registry.*"
    "$JS.API.STREAM.INFO.KV_{{ $p }}_sessions"
    "$JS.API.CONSUMER.NAMES.KV_{{ $p }}_sessions"
    "$JS.API.CONSUMER.LIST.KV_{{ $p }}_sessions"
    "$JS.API.CONSUMER.INFO.KV_{{ $p }}_sessions.*"
    "$JS.API.STREAM.INFO.KV_{{ $p }}_policies"
    "$JS.API.CONSUMER.NAMES.KV_{{ $p }}_policies"
    "$JS.API.CONSUMER.LIST.KV_{{ $p }}_policies"
    "$JS.API.CONSUMER.INFO.KV_{{ $p }}_policies.*"
    "$JS.API.STREAM.INFO.KV_{{ $p }}_approvals"
    "$JS.API.CONSUMER.NAMES.KV_{{ $p }}_approvals"
    "$JS.API.CONSUMER.LIST.KV_{{ $p }}_approvals"
    "$JS.API.CONSUMER.INFO.KV_{{ $p }}_approvals.*"
    "$JS.API.STREAM.INFO.KV_{{ $p }}_limits"
    "$JS.API.CONSUMER.NAMES.KV_{{ $p }}_limits"
    "$JS.API.CONSUMER.LIST.KV_{{ $p }}_limits"
    "$JS.API.CONSUMER.INFO.KV_{{ $p }}_limits.*"
    "$JS.API.STREAM.INFO.OBJ_{{ $p }}_blobs"
    "$JS.API.CONSUMER.NAMES.OBJ_{{ $p }}_blobs"
    "$JS.API.CONSUMER.LIST.OBJ_{{ $p }}_blobs"
    "$JS.API.CONSUMER.INFO.OBJ_{{ $p }}_blobs.*"
    "$JS.API.CONSUMER.CREATE.{{ $u }}_CALLS.*"
    "$JS.API.CONSUMER.CREATE.{{ $u }}_CALLS.*.{{ $p }}.call.>"
    "$JS.API.CONSUMER.MSG.NEXT.{{ $u }}_CALLS.*"
    "$JS.API.CONSUMER.DELETE.{{ $u }}_CALLS.*"
    "$JS.API.DIRECT.GET.{{ $u }}_RESULTS.>"
    "$JS.API.DIRECT.GET.{{ $u }}_EVENTS"
    "$JS.API.DIRECT.GET.{{ $u }}_EVENTS.>"
    "$JS.API.STREAM.MSG.GET.{{ $u }}_RESULTS"
    "$JS.API.CONSUMER.CREATE.{{ $u }}_DLQ.*.{{ $p }}.dlq.>"
    "$JS.API.CONSUMER.MSG.NEXT.{{ $u }}_DLQ.*"
    "$JS.API.CONSUMER.DELETE.{{ $u }}_DLQ.*"
    "$JS.API.DIRECT.GET.{{ $u }}_DLQ"
    "{{ $p }}.admin.dlq.retry"
    "$JS.API.DIRECT.GET.KV_{{ $p }}_registry.>"
    "{{ $p }}.shadow.>"
  ]}
  subscribe: {allow: [
    "_INBOX_{{ $p }}_operator.>"
    "{{ $p }}.result.*.replay.*"
  ]}
}
{{- end }}
