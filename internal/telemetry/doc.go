// Package telemetry is toolwire's observability: traces, metrics, trace
// ids in logs, health endpoints. Components do not call it from inside
// their work; they are wrapped by it (STYLE habit 10): the executor
// decorator (internal/executors/observed, which uses this package's
// metrics and attributes), the worker's delivery, attempt and result-publish
// middleware (internal/worker/observe.go) and the dispatcher's admission
// and publish wrappers (internal/dispatch/observe.go) are the only places
// that make spans or record metrics.
//
// # Tracing
//
// OpenTelemetry, go.opentelemetry.io/otel v1.47.0. SetupTracing reads the
// standard OTEL_* variables and returns a provider only when they name an
// exporter (OTEL_TRACES_EXPORTER=otlp, or an OTEL_EXPORTER_OTLP_(TRACES_)
// ENDPOINT), over http/protobuf (default) or grpc. Otherwise tracing is
// off, and off means nil: the dispatcher and the worker hold a nil
// trace.Tracer and skip every span, header read and header write — not a
// noop provider, whose Start still allocates a context per span. The
// benchmark (toolwire-bench -path nats) shows no difference with tracing
// off.
//
// One call is one trace:
//
//	admit                               dispatcher; child of the caller's traceparent if the HTTP request had one
//	└─ send <CALLS stream>              PRODUCER; its context is written into the call message's headers
//	   └─ process <pool consumer>       worker, CONSUMER, remote parent; one per delivery
//	      ├─ attempt <tool>             one per attempt (in-process retries are siblings)
//	      │  └─ execute_tool <tool>     the executor decorator (GenAI execute_tool span)
//	      └─ attempt <tool>
//	         └─ execute_tool <tool>
//
// A redelivery (nak, AckWait expiry, hand-back) carries the same headers,
// so each delivery is another CONSUMER span under the same PRODUCER span.
// A retry parked for a long delay (a message schedule in the retries
// stream, put back on the calls stream by the dispatcher's mover) keeps
// the trace too: the worker writes the delivery's context into the
// schedule, the server copies a schedule's headers onto the message it
// produces, and the mover copies traceparent/tracestate onto the call it
// republishes; that delivery's CONSUMER span is a child of the delivery
// that parked the call.
//
// Attributes follow the GenAI tool-execution conventions
// (gen_ai.operation.name = execute_tool, gen_ai.tool.name,
// gen_ai.tool.call.id) and the messaging ones (messaging.system = nats,
// messaging.destination.name = the subject, messaging.consumer.group.name
// = the pool's durable consumer, messaging.message.id = the call id). The
// keys are spelled out in attrs.go: the GenAI keys moved between semconv
// packages, and dashboards depend on these names.
//
// The trace context crosses NATS as W3C traceparent/tracestate headers
// through HeaderCarrier, an adapter over nats.Header. The propagation
// package's HeaderCarrier is deliberately not used: it goes through
// http.Header, which canonicalises keys, so a lower-case traceparent
// written by another NATS client would be missed. Headers are written
// only when the context has a valid span context (never with tracing
// off); an unsampled one is still propagated so the worker keeps the
// dispatcher's sampling decision.
//
// # Logs
//
// LogHandler wraps the component's slog.Handler and adds trace_id and
// span_id to records logged with a context carrying a span (the
// …Context methods; the worker's per-call logger carries the call's
// context).
//
// # Metrics
//
// Prometheus, through github.com/prometheus/client_golang v1.24.1 used
// directly rather than the OTel metrics SDK with its Prometheus exporter
// (v0.69.0): the exporter is itself built on client_golang, so going
// direct drops a layer (the SDK's aggregation, attribute-set hashing and
// name translation) and its dependencies, and the hot path becomes an
// atomic add on a pre-bound counter or histogram. Per-tool instruments
// are bound once per (tool, executor) and kept in a copy-on-write map, so
// a call records without locks or allocations. Names:
//
// Worker (its --http address, default 127.0.0.1:9090, and the dispatcher
// for its in-process workers):
//
//	toolwire_calls_total{tool,executor,outcome}            terminal results published; outcome = ok or the error type (timeout, max_attempts, ...)
//	toolwire_call_duration_seconds{tool,executor}          end to end: admission → result (dispatcher's and worker's clocks)
//	toolwire_executions_total{tool,executor,outcome}       attempts run by executors
//	toolwire_execution_duration_seconds{tool,executor}     one attempt in its executor
//	toolwire_queue_wait_seconds{tool,executor}             admission → start of the first attempt
//	toolwire_retries_total{tool,executor}                  attempts after the first
//	toolwire_redeliveries_total{pool}                      deliveries with NumDelivered > 1
//	toolwire_inflight_calls{pool}                          calls being handled now
//	toolwire_settle_errors_total{verb}                     failed ack/nak/term
//	toolwire_pool_lag_messages{pool}                       NumPending + NumAckPending of the worker's pools
//	toolwire_pool_pending_messages{pool}, toolwire_pool_ack_pending_messages{pool}, toolwire_pool_redelivered_messages{pool}
//
// Dispatcher (on its API address, next to /healthz and /readyz):
//
//	toolwire_dispatcher_calls_total{outcome}               accepted, duplicate, rejected, error
//	toolwire_dispatcher_rejections_total{reason}           by error type (not_found, validation, overloaded, ...)
//	toolwire_dispatcher_admission_duration_seconds         receipt → acknowledged publish of accepted calls
//	toolwire_dispatcher_waiting_callers                    callers waiting in Call
//	toolwire_pool_lag_messages{pool} (every pool), toolwire_dlq_messages
//	toolwire_dispatcher_pool_backlog{pool}                 the dispatcher's view of a pool's calls queued or running (admission's, see internal/poolview "Overload")
//	toolwire_dispatcher_pool_backlog_bound{pool}           the backlog past which it refuses (absent: no bound)
//	toolwire_dispatcher_pool_drain_rate{pool}              calls/s the pool finished over the last 2s
//	toolwire_dispatcher_pool_expected_wait_seconds{pool}   queued calls over the drain rate
//	toolwire_dispatcher_overload_refusals_total{cause,target}  OVERLOADED at admission: cause backlog, expected_wait, store or archive_behind; target the pool, store or stream
//	toolwire_archive_lag_seconds{stream}                   with an archive store: age of the stream's oldest unarchived message, 0 when caught up
//	toolwire_dispatcher_intents_refused_total             intents of stored results refused when applied (not in the catalog, undeclared, malformed)
//	toolwire_latency_budget_exceeded_total{tool,source,mode}  calls admitted here whose result came after their soft latency budget (source spec or policy; mode the policy entry's, "" = any); never a failure
//	toolwire_store_bytes{store}, toolwire_store_max_bytes{store}  use and limit of every stream and bucket (read every 2s)
//	toolwire_store_messages{store}, toolwire_store_max_messages{store}  messages stored (absent: the account, not counted), and the limit (absent: unbounded)
//	toolwire_store_used_ratio{store}                       the nearer limit's share in use (absent: unbounded); a full store reads just under 1
//	toolwire_store_growth_bytes_per_second{store}          net growth over the last 10 minutes (internal/capacity's Sampler, every 30s)
//	toolwire_store_bytes_per_call{store}                   what the store took per call written over that window (absent: no call)
//	toolwire_store_seconds_to_full{store}                  until full at that growth, 0 = full now (calls, idempotency, account: at the dispatchers' 90% high-water) (absent: never at this rate — not growing, or ageing out faster than it fills — unbounded, not measured)
//
// Both, on a connection made by bus.Dial (an external cluster; exported at
// scrape time from its bus.ConnMonitor by NewConnCollector):
//
//	toolwire_nats_disconnects_total                        the connection lost its server (closed socket, unanswered PINGs, a stuck write, a watchdog move)
//	toolwire_nats_reconnects_total                         the connection was established again
//	toolwire_nats_server_changes_total                     reconnects that landed on another server
//	toolwire_nats_watchdog_moves_total                     moves off a silent server or one whose JetStream failed (bus.Watchdog)
//
// The lag and DLQ gauges are read from JetStream (consumer and stream
// info) at scrape time by StreamStats and cached for 2s, so scrapes cost
// at most one round of requests per 2s; a failed read leaves the series
// out (and counts toolwire_jetstream_scrape_errors_total) rather than
// reporting a false zero. Every replica of a pool reports the same
// consumer's lag: aggregate with max, not sum. The tool label is bounded
// by the tools served; the dispatcher's metrics carry no tool label, since
// a rejected call's tool name is caller input.
//
// # Health
//
// Mux serves /healthz (the process answers), /readyz (a ReadyFunc: for
// the worker, started with its specs published, not stopping, NATS
// connected, the calls and results streams and its pool consumers
// present; for the dispatcher, registry loaded, NATS connected, its
// streams present) and /metrics.
package telemetry
