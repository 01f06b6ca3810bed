package telemetry

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// latencyBuckets (seconds) span a no-op native tool (sub-millisecond) to
// the default start-to-close bound of five minutes.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// OutcomeOK is the outcome label of a successful call or attempt; failures
// carry their error type in lower case ("timeout", "max_attempts", ...).
const OutcomeOK = "ok"

// outcomeNames[t] is the outcome label of error type t; index 0
// (unspecified) is "ok".
var outcomeNames = func() []string {
	n := int32(0)
	for v := range toolwirev1.ErrorType_name {
		n = max(n, v)
	}
	names := make([]string, n+1)
	for v, s := range toolwirev1.ErrorType_name {
		names[v] = strings.ToLower(strings.TrimPrefix(s, "ERROR_TYPE_"))
	}
	names[0] = OutcomeOK
	return names
}()

// Outcome is the outcome label of an error type; ERROR_TYPE_UNSPECIFIED
// (no error) is "ok".
func Outcome(t toolwirev1.ErrorType) string {
	if int(t) < 0 || int(t) >= len(outcomeNames) {
		return "unknown"
	}
	return outcomeNames[t]
}

// ExecutorLabel is the executor label of an executor type ("native",
// "mcp", "sandbox", "http").
func ExecutorLabel(t toolwirev1.ExecutorType) string {
	return strings.ToLower(strings.TrimPrefix(t.String(), "EXECUTOR_TYPE_"))
}

// WorkerMetrics are a worker's instruments. The per-tool ones are bound
// once per (tool, executor) and cached, so recording an attempt or a
// result costs a lock-free map lookup and a few atomic adds.
type WorkerMetrics struct {
	calls        *prometheus.CounterVec
	callDuration *prometheus.HistogramVec
	executions   *prometheus.CounterVec
	execDuration *prometheus.HistogramVec
	queueWait    *prometheus.HistogramVec
	retries      *prometheus.CounterVec
	redeliveries *prometheus.CounterVec
	inflight     *prometheus.GaugeVec
	settleErrors *prometheus.CounterVec
	badOutput    *prometheus.CounterVec

	mu    sync.Mutex
	tools atomic.Pointer[map[toolKey]*ToolInstruments]
}

type toolKey struct {
	tool string
	exec toolwirev1.ExecutorType
}

// NewWorkerMetrics creates the worker's instruments and registers them
// with reg; a nil reg leaves them unregistered (they still count). It
// fails when reg already holds metrics of the same names (one worker per
// registry).
func NewWorkerMetrics(reg prometheus.Registerer) (*WorkerMetrics, error) {
	tl := []string{"tool", "executor"}
	m := &WorkerMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolwire_calls_total",
			Help: "Calls answered by this worker (terminal results published), by tool, executor type and outcome (ok or the error type)."},
			[]string{"tool", "executor", "outcome"}),
		callDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "toolwire_call_duration_seconds",
			Help:    "End to end: from admission by the dispatcher to the published result (two clocks: the dispatcher's and the worker's).",
			Buckets: latencyBuckets}, tl),
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolwire_executions_total",
			Help: "Attempts run by executors, by tool, executor type and outcome."}, []string{"tool", "executor", "outcome"}),
		execDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "toolwire_execution_duration_seconds",
			Help: "Duration of one attempt in its executor.", Buckets: latencyBuckets}, tl),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "toolwire_queue_wait_seconds",
			Help: "From admission by the dispatcher to the start of the first attempt.", Buckets: latencyBuckets}, tl),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolwire_retries_total",
			Help: "Attempts after the first (in-process retries, redeliveries and scheduled retries alike)."}, tl),
		redeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolwire_redeliveries_total",
			Help: "Calls delivered by JetStream more than once (naks, AckWait expiries, hand-backs), by pool."}, []string{"pool"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "toolwire_inflight_calls",
			Help: "Calls being handled by this worker now, by pool."}, []string{"pool"}),
		settleErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolwire_settle_errors_total",
			Help: "Failed acks, naks and terms (a lost ack is a duplicate execution later), by verb."}, []string{"verb"}),
		badOutput: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolwire_output_schema_violations_total",
			Help: "Results whose structured output did not match the tool's output_schema, by tool, executor type and action (refused: answered PERMANENT; passed: the spec's output_schema_advisory)."},
			[]string{"tool", "executor", "action"}),
	}
	m.tools.Store(&map[toolKey]*ToolInstruments{})
	if reg != nil {
		for _, c := range []prometheus.Collector{m.calls, m.callDuration, m.executions, m.execDuration, m.queueWait,
			m.retries, m.redeliveries, m.inflight, m.settleErrors, m.badOutput} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// ToolInstruments are the instruments of one tool, bound to its labels.
type ToolInstruments struct {
	m                          *WorkerMetrics
	tool, exec                 string
	callDuration, execDuration prometheus.Observer
	queueWait                  prometheus.Observer
	retries                    prometheus.Counter
	calls, executions          []atomic.Pointer[prometheus.Counter] // by error type; 0 = ok
}

// Tool returns the instruments of tool run by executor type exec.
func (m *WorkerMetrics) Tool(tool string, exec toolwirev1.ExecutorType) *ToolInstruments {
	k := toolKey{tool, exec}
	if ti := (*m.tools.Load())[k]; ti != nil {
		return ti
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.tools.Load()
	if ti := old[k]; ti != nil {
		return ti
	}
	el := ExecutorLabel(exec)
	ti := &ToolInstruments{m: m, tool: tool, exec: el,
		callDuration: m.callDuration.WithLabelValues(tool, el), execDuration: m.execDuration.WithLabelValues(tool, el),
		queueWait: m.queueWait.WithLabelValues(tool, el), retries: m.retries.WithLabelValues(tool, el),
		calls: make([]atomic.Pointer[prometheus.Counter], len(outcomeNames)), executions: make([]atomic.Pointer[prometheus.Counter], len(outcomeNames))}
	next := make(map[toolKey]*ToolInstruments, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[k] = ti
	m.tools.Store(&next)
	return ti
}

// counter returns the bound counter of outcome t in slots, binding it on
// first use.
func (ti *ToolInstruments) counter(vec *prometheus.CounterVec, slots []atomic.Pointer[prometheus.Counter], t toolwirev1.ErrorType) prometheus.Counter {
	if int(t) < 0 || int(t) >= len(slots) {
		return vec.WithLabelValues(ti.tool, ti.exec, "unknown")
	}
	if c := slots[t].Load(); c != nil {
		return *c
	}
	c := vec.WithLabelValues(ti.tool, ti.exec, outcomeNames[t])
	slots[t].Store(&c)
	return c
}

// Execution records one attempt: its outcome (ERROR_TYPE_UNSPECIFIED =
// ok) and duration.
func (ti *ToolInstruments) Execution(outcome toolwirev1.ErrorType, d time.Duration) {
	ti.counter(ti.m.executions, ti.executions, outcome).Inc()
	ti.execDuration.Observe(d.Seconds())
}

// QueueWait records the wait of a call from admission to its first
// attempt.
func (ti *ToolInstruments) QueueWait(d time.Duration) { ti.queueWait.Observe(max(d, 0).Seconds()) }

// Retry counts an attempt after the first.
func (ti *ToolInstruments) Retry() { ti.retries.Inc() }

// Call records a call's terminal result: its outcome and its end-to-end
// duration (negative = unknown, not observed).
func (ti *ToolInstruments) Call(outcome toolwirev1.ErrorType, endToEnd time.Duration) {
	ti.counter(ti.m.calls, ti.calls, outcome).Inc()
	if endToEnd >= 0 {
		ti.callDuration.Observe(endToEnd.Seconds())
	}
}

// BadOutput counts a result whose structured output did not match the
// tool's output schema: refused (answered PERMANENT) or passed (advisory).
func (ti *ToolInstruments) BadOutput(refused bool) {
	action := "passed"
	if refused {
		action = "refused"
	}
	ti.m.badOutput.WithLabelValues(ti.tool, ti.exec, action).Inc()
}

// Pool returns the instruments of one pool.
func (m *WorkerMetrics) Pool(name string) PoolInstruments {
	return PoolInstruments{InFlight: m.inflight.WithLabelValues(name), Redeliveries: m.redeliveries.WithLabelValues(name)}
}

// PoolInstruments are the instruments of one pool, bound to its label.
type PoolInstruments struct {
	InFlight     prometheus.Gauge
	Redeliveries prometheus.Counter
}

// SettleError counts a failed ack, nak or term.
func (m *WorkerMetrics) SettleError(verb string) { m.settleErrors.WithLabelValues(verb).Inc() }

// Admission outcomes of the dispatcher.
const (
	AdmissionAccepted  = "accepted"
	AdmissionDuplicate = "duplicate"
	AdmissionRejected  = "rejected"
	AdmissionError     = "error"
	// AdmissionAwaitingApproval: an ask decision parked the call for an
	// approver (not queued yet).
	AdmissionAwaitingApproval = "awaiting_approval"
)

// DispatcherMetrics are a dispatcher's instruments.
type DispatcherMetrics struct {
	admissions *prometheus.CounterVec
	rejections *prometheus.CounterVec
	admitTime  prometheus.Observer
	bound      map[string]prometheus.Counter
	waiting    atomic.Pointer[func() float64]
	load       loadCollector     // load.go
	capacity   capacityCollector // capacity.go
	overloads  *prometheus.CounterVec
	// intentsRefused counts intents refused when applied (IntentsRefused).
	intentsRefused prometheus.Counter
	// resultsRefused counts stored results not believed (ResultRefused).
	resultsRefused *prometheus.CounterVec
	archive        archiveCollector // toolwire_archive_lag_seconds (archive.go)
	// overBudget counts calls over their soft latency budget
	// (LatencyBudgetExceeded).
	overBudget *prometheus.CounterVec
}

// ObserveWaiting makes f, read at scrape time, the number of callers
// waiting (the dispatcher sets it when it starts).
func (m *DispatcherMetrics) ObserveWaiting(f func() float64) { m.waiting.Store(&f) }

// NewDispatcherMetrics creates the dispatcher's instruments and registers
// them with reg (nil = unregistered). One dispatcher records into them.
func NewDispatcherMetrics(reg prometheus.Registerer) (*DispatcherMetrics, error) {
	m := &DispatcherMetrics{
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolwire_dispatcher_calls_total",
			Help: "Calls submitted to this dispatcher, by admission outcome: accepted (queued), duplicate (idempotency key of an earlier call), rejected (refused by admission, or not taken by the calls stream), awaiting_approval (parked for an approver), error (the caller left or the dispatcher stopped)."},
			[]string{"outcome"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolwire_dispatcher_rejections_total",
			Help: "Calls rejected or refused, by error type."}, []string{"reason"}),
		overloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolwire_dispatcher_overload_refusals_total",
			Help: "Calls refused OVERLOADED at admission, by cause (backlog, expected_wait, store) and target (the pool, or the store)."}, []string{"cause", "target"}),
	}
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "toolwire_dispatcher_admission_duration_seconds",
		Help: "From receipt of a call to its acknowledged publish (admission and the calls stream's ack).", Buckets: latencyBuckets})
	m.admitTime = h
	m.intentsRefused = prometheus.NewCounter(prometheus.CounterOpts{Name: "toolwire_dispatcher_intents_refused_total",
		Help: "Intents of stored results refused when applied to a session: not in the intent catalog, not declared by the tool's spec version, or malformed."})
	m.resultsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolwire_dispatcher_results_refused_total",
		Help: "Results and events found in the record and not believed (internal/signing): unsigned, forged, wrong pool, wrong call, wrong attempt."},
		[]string{"problem"})
	m.overBudget = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolwire_latency_budget_exceeded_total",
		Help: "Calls whose result came after their soft latency budget (from admission to the stored result), by tool, where the budget came from (spec, policy) and the session mode its policy entry names (empty: any). Never a failure."},
		[]string{"tool", "source", "mode"})
	m.bound = map[string]prometheus.Counter{}
	for _, o := range []string{AdmissionAccepted, AdmissionDuplicate, AdmissionRejected, AdmissionError, AdmissionAwaitingApproval} {
		m.bound[o] = m.admissions.WithLabelValues(o)
	}
	cs := []prometheus.Collector{m.admissions, m.rejections, h, m.overloads, &m.load, &m.capacity, m.intentsRefused, m.resultsRefused, m.overBudget,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "toolwire_dispatcher_waiting_callers",
			Help: "Callers waiting in Call for a result on this dispatcher."}, func() float64 {
			if f := m.waiting.Load(); f != nil {
				return (*f)()
			}
			return 0
		})}
	cs = append(cs, &m.archive)
	if reg != nil {
		for _, c := range cs {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// Admitted records an admission outcome and, for accepted calls, the
// admission time.
func (m *DispatcherMetrics) Admitted(outcome string, d time.Duration) {
	m.bound[outcome].Inc()
	if outcome == AdmissionAccepted {
		m.admitTime.Observe(d.Seconds())
	}
}

// IntentsRefused counts n intents refused when applied to a session.
func (m *DispatcherMetrics) IntentsRefused(n int) { m.intentsRefused.Add(float64(n)) }

// ResultRefused counts a result or event not believed, by its problem.
func (m *DispatcherMetrics) ResultRefused(problem string) {
	m.resultsRefused.WithLabelValues(problem).Inc()
}

// LatencyBudgetExceeded counts a call of tool over its soft latency
// budget, which came from source (spec, policy) for mode ("" = any). The
// labels are bounded: tools of the registry, two sources, the modes the
// policy names.
func (m *DispatcherMetrics) LatencyBudgetExceeded(tool, source, mode string) {
	m.overBudget.WithLabelValues(tool, source, mode).Inc()
}

// Rejected records a rejection with its error type.
func (m *DispatcherMetrics) Rejected(t toolwirev1.ErrorType) {
	m.bound[AdmissionRejected].Inc()
	m.rejections.WithLabelValues(Outcome(t)).Inc()
}
