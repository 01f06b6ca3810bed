package audit

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/redact"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// Outcomes of a record.
const (
	OutcomeOK           = "ok"
	OutcomeError        = "error" // the tool (or its execution) failed
	OutcomeCancelled    = "cancelled"
	OutcomeExpired      = "expired"
	OutcomeDeadLettered = "dead_lettered"
	OutcomePending      = "pending"     // no result yet, within the settle time
	OutcomeMissing      = "missing"     // no result after the settle time: an anomaly
	OutcomeUndecodable  = "undecodable" // a CALLS message that is no ToolCall
)

// ErrNoInstallation: the prefix names no installation on this server
// (bus.ErrNoInstallation, which dlq.ErrNoInstallation is too).
var ErrNoInstallation = bus.ErrNoInstallation

// Source reads an installation's streams for audits. It never creates or
// changes a stream.
type Source struct {
	js                     jetstream.JetStream
	keys                   *signing.Keyring
	calls, results, events jetstream.Stream
	registry               jetstream.KeyValue
	subj                   bus.Subjects
	shadowPrefix           string

	// arch is the archive (UseArchive); nil = the live streams alone.
	arch *archived

	specMu sync.Mutex
	specs  map[string]string // name@version -> input schema
}

// Open attaches to the installation with prefix on nc (bus.OpenView).
func Open(ctx context.Context, nc *nats.Conn, prefix string) (*Source, error) {
	v, err := bus.OpenView(ctx, nc, prefix)
	if err != nil {
		return nil, err
	}
	if v.Registry == nil {
		return nil, fmt.Errorf("audit: registry: %w", v.RegistryErr)
	}
	keys := bus.NewKeyring(v.Registry, v.NC, v.Config.RegistryBucket())
	keys.EventsWith(bus.EventsReader(v.NC, v.Events, v.Subjects))
	s := &Source{js: v.JS, keys: keys, calls: v.Calls, results: v.Results, events: v.Events, registry: v.Registry, subj: v.Subjects, specs: map[string]string{}}
	s.shadowPrefix = strings.TrimSuffix(s.subj.AllShadow(), ">")
	return s, nil
}

// Filter selects the calls of an audit. Zero fields match everything.
type Filter struct {
	// Since and Until bound the time the call was admitted (stored).
	Since, Until                         time.Time
	Tenant, Session, Agent, Tool, CallID string
	// Outcome keeps records of one outcome (OutcomeOK, ...) or, for
	// failures, of one error type name such as "TIMEOUT".
	Outcome string
}

// Options tune an audit run.
type Options struct {
	// Events adds every call's lifecycle events (one stream read per
	// call: slower). Events are kept for the events stream's retention.
	Events bool
	// Verify checks, besides every result's signature (always), the
	// signatures of every call's events and that a worker's result is
	// its attempt's claim holder's (one more stream read per call), and,
	// with an archive (UseArchive), the archive's chains.
	Verify bool
	// Settle is how long after admission a call without a result counts
	// as pending rather than missing. Default 10m.
	Settle time.Duration
	// Lookups is how many result lookups run at once. Default 32.
	Lookups int
	// Progress, if set, is called with the number of CALLS messages read,
	// at most every 200ms and at the end.
	Progress func(scanned int)
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Record is one audited call: the call (arguments redacted), how it was
// admitted, its retry re-entries, its events and its terminal response.
type Record struct {
	CallID      string          `json:"call_id"`
	Seq         uint64          `json:"seq"`
	Time        time.Time       `json:"time"`
	Tenant      string          `json:"tenant,omitempty"`
	Agent       string          `json:"agent,omitempty"`
	Session     string          `json:"session,omitempty"`
	User        string          `json:"user,omitempty"`
	Run         string          `json:"run,omitempty"`
	Tool        string          `json:"tool,omitempty"`
	SpecVersion string          `json:"spec_version,omitempty"`
	Dispatcher  string          `json:"dispatcher,omitempty"`
	Idempotency string          `json:"idempotency_key,omitempty"`
	Arguments   json.RawMessage `json:"arguments,omitempty"`
	// Admission is "accepted" for every call in CALLS (refused calls
	// never reach it; they are REJECTED events, which Refusals reads:
	// "rejected").
	Admission string `json:"admission"`
	// Policy is what the policy decided: for an admitted call the version
	// in force and the rule that allowed it (or the grant or approval
	// that covered an ask), for a refusal by the policy the version, the
	// rule and the reason the caller was told. Absent when no policy was
	// in force (or another admission step refused the call).
	Policy *Policy `json:"policy,omitempty"`
	// Events are the call's lifecycle events (Options.Events), as
	// protobuf JSON: the first 1,000 believed.
	Events []json.RawMessage `json:"events,omitempty"`
	// EventsNotShown counts the believed events past the 1,000 Events
	// shows (Options.Events): a call with that many (a long partial
	// output, many attempts) is told, never cut silently.
	EventsNotShown int             `json:"events_not_shown,omitempty"`
	Response       json.RawMessage `json:"response,omitempty"`
	// Signature proves who wrote the response (internal/signing).
	Signature *Signature `json:"signature,omitempty"`
	// Refused lists results (and, with Options.Verify, events) stored for
	// the call and not believed: forged, unsigned, of another pool, call
	// or attempt. Each is an anomaly.
	Refused []RefusedResult `json:"refused_results,omitempty"`
	Outcome string          `json:"outcome"`
	// ErrorType is the failure's type name, for failed calls.
	ErrorType string `json:"error_type,omitempty"`

	// Call is the call as stored, arguments unredacted (never printed;
	// replays re-execute it). Nil for undecodable messages.
	Call *toolwirev1.ToolCall `json:"-"`
	// Result is the terminal response; nil while there is none.
	Result *toolwirev1.ToolResponse `json:"-"`
	// Traceparent is the W3C trace context the call was published with
	// (One only); "" when tracing was off.
	Traceparent string `json:"-"`
}

// Policy is the audit's view of a policy decision (DESIGN §6).
type Policy struct {
	// Outcome is "allow", "ask" or "deny".
	Outcome string `json:"outcome"`
	// Version is the policy document's version ("sha256:<hex>").
	Version string `json:"version,omitempty"`
	// Rule is the id of the rule that decided; empty when a layer's
	// default (Default: "tenant" or "agent") or the tool's
	// requires_approval decided.
	Rule             string `json:"rule,omitempty"`
	Default          string `json:"default,omitempty"`
	RequiresApproval bool   `json:"requires_approval,omitempty"`
	// Reason is what a refused or asked caller was told.
	Reason string `json:"reason,omitempty"`
	// Grant and Approval covered an ask, which made it an allow.
	Grant    string `json:"grant,omitempty"`
	Approval string `json:"approval,omitempty"`
}

// policyOfCall is the decision an admitted call carries; nil without one.
func policyOfCall(c *toolwirev1.ToolCall) *Policy {
	if c.PolicyVersion == "" && c.PolicyRule == "" && c.GrantId == "" && c.ApprovalId == "" {
		return nil
	}
	return &Policy{Outcome: "allow", Version: c.PolicyVersion, Rule: c.PolicyRule, Grant: c.GrantId, Approval: c.ApprovalId}
}

// policyOfDecision is the audit's form of a recorded decision; nil for
// none.
func policyOfDecision(d *toolwirev1.PolicyDecision) *Policy {
	if d == nil {
		return nil
	}
	return &Policy{Outcome: strings.ToLower(strings.TrimPrefix(d.Outcome.String(), "POLICY_OUTCOME_")), Version: d.Version,
		Rule: d.RuleId, Default: d.DefaultLayer, RequiresApproval: d.RequiresApproval, Reason: d.Reason,
		Grant: d.GrantId, Approval: d.ApprovalId}
}

// Anomaly is a completeness problem found by an audit.
type Anomaly struct {
	Kind   string `json:"kind"` // "missing_result", "gap" or "unbelieved_result" (Record.Refused)
	CallID string `json:"call_id,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
	Detail string `json:"detail"`
}

// Summary counts an audit run.
type Summary struct {
	// Scanned counts CALLS messages read; Records the records emitted.
	Scanned, Records int
	// RetryEntries counts CALLS messages that re-enter a call for a
	// retry (not calls of their own).
	RetryEntries int
	Outcomes     map[string]int
	Anomalies    []Anomaly
	// FirstSeq and LastSeq are the CALLS sequences covered (archived
	// and live).
	FirstSeq, LastSeq uint64
	// ArchiveSegments counts the archive segments verified (Options.Verify
	// with an archive: UseArchive).
	ArchiveSegments int
	// ArchiveSegmentsRead counts the archive segments of results and
	// events loaded to complete archived calls (UseArchive): about one
	// load per segment the calls' lives cover.
	ArchiveSegmentsRead int

	mu sync.Mutex // guards Anomalies while Run runs
}

// addAnomaly records a (the scan and the writer both find some).
func (s *Summary) addAnomaly(a Anomaly) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Anomalies = append(s.Anomalies, a)
}

// OK reports whether the audit found no anomaly.
func (s *Summary) OK() bool { return len(s.Anomalies) == 0 }

type job struct {
	rec  *Record
	call *toolwirev1.ToolCall
	// end is when the call ended: its believed result's stored time
	// (zero until found); it bounds the archive's search for its events.
	end  time.Time
	done chan struct{}
	err  error
}

// Run streams the records f selects, in CALLS order, to emit, and returns
// the summary. Memory stays bounded whatever the range: CALLS is read with
// an ordered consumer and results are looked up by call id a window at a
// time.
func (s *Source) Run(ctx context.Context, f Filter, o Options, emit func(*Record) error) (*Summary, error) {
	if f.Tenant != "" && !bus.ValidTenant(f.Tenant) {
		// Never mapped to a subject token: a.b would read tenant a_b.
		return nil, fmt.Errorf("audit: tenant filter %q does not match %s", f.Tenant, bus.TenantPattern)
	}
	o.Settle = cmp.Or(o.Settle, defaultSettle)
	o.Lookups = cmp.Or(o.Lookups, 32)
	if o.Now == nil {
		o.Now = time.Now
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sum := &Summary{Outcomes: map[string]int{}}
	var loads int64
	if s.arch != nil {
		loads = s.arch.loads.Load()
	}

	work := make(chan *job)
	ordered := make(chan *job, 4*o.Lookups)
	var workers sync.WaitGroup
	for range o.Lookups {
		workers.Go(func() {
			for j := range work {
				j.err = s.complete(ctx, j, o)
				close(j.done)
			}
		})
	}
	emitted := make(chan error, 1)
	go func() {
		var err error
		for j := range ordered {
			<-j.done
			if err != nil {
				continue // drain
			}
			if err = j.err; err != nil {
				cancel(err)
				continue
			}
			if err = s.account(sum, j.rec, f, emit); err != nil {
				cancel(err)
			}
		}
		emitted <- err
	}()
	scanErr := s.scan(ctx, f, o, sum, func(j *job) error {
		select {
		case ordered <- j:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		if j.call == nil {
			close(j.done)
			return nil
		}
		select {
		case work <- j:
			return nil
		case <-ctx.Done():
			close(j.done)
			return context.Cause(ctx)
		}
	})
	close(work)
	workers.Wait()
	close(ordered)
	if err := <-emitted; err != nil {
		return sum, err
	}
	if s.arch != nil {
		sum.ArchiveSegmentsRead = int(s.arch.loads.Load() - loads)
	}
	if scanErr == nil && o.Verify {
		scanErr = s.verifyArchive(ctx, sum)
	}
	return sum, scanErr
}

// account counts a finished record and emits it when it matches.
func (s *Source) account(sum *Summary, r *Record, f Filter, emit func(*Record) error) error {
	if f.Outcome != "" && f.Outcome != r.Outcome && !strings.EqualFold(f.Outcome, r.ErrorType) {
		return nil
	}
	sum.Records++
	sum.Outcomes[r.Outcome]++
	for _, x := range r.Refused {
		sum.addAnomaly(Anomaly{Kind: "unbelieved_result", CallID: r.CallID, Seq: x.Seq,
			Detail: fmt.Sprintf("%s: %s (signer %s)", x.Problem, x.Detail, cmp.Or(x.Signer, "none"))})
	}
	switch r.Outcome {
	case OutcomeMissing:
		sum.addAnomaly(Anomaly{Kind: "missing_result", CallID: r.CallID, Seq: r.Seq,
			Detail: fmt.Sprintf("accepted %s, no terminal result in RESULTS", r.Time.Format(time.RFC3339))})
	case OutcomeUndecodable:
		// A message someone published that is not a call: the workers
		// dead-letter it. Counted, not an anomaly of the audit trail.
	}
	return emit(r)
}

// CallKind is what a CALLS message is (DecodeCall).
type CallKind int

// The kinds of CALLS messages.
const (
	ACall         CallKind = iota // a call of its own
	AReplay                       // a replay's call, on a shadow subject
	ARetryEntry                   // a call re-entered for a retry (its Nats-Msg-Id is not its call id)
	AnUndecodable                 // no ToolCall, or one without an id
)

// DecodeCall reads a CALLS message (its subject, data and Nats-Msg-Id
// header): the call and ACall, or what the message is instead.
// shadowPrefix starts the replays' subjects (Subjects.AllShadow without
// its ">").
func DecodeCall(subject string, data []byte, msgID, shadowPrefix string) (*toolwirev1.ToolCall, CallKind) {
	if strings.HasPrefix(subject, shadowPrefix) {
		return nil, AReplay
	}
	call := &toolwirev1.ToolCall{}
	if err := proto.Unmarshal(data, call); err != nil || call.CallId == "" {
		return nil, AnUndecodable
	}
	if msgID != "" && msgID != call.CallId {
		return nil, ARetryEntry
	}
	return call, ACall
}

// jobOf builds the job of one CALLS message, or says to skip it.
func (s *Source) jobOf(m callMsg, f Filter, sum *Summary) (*job, bool) {
	call, kind := DecodeCall(m.subject, m.data, m.msgID, s.shadowPrefix)
	switch kind {
	case AReplay:
		return nil, true
	case AnUndecodable:
		if f.CallID != "" || f.Session != "" || f.Agent != "" {
			return nil, true
		}
		return &job{rec: &Record{Seq: m.seq, Time: m.stored, Admission: "none", Outcome: OutcomeUndecodable},
			done: make(chan struct{})}, false
	case ARetryEntry:
		sum.RetryEntries++ // published by the retry mover
		return nil, true
	}
	c := call.GetCaller()
	if (f.CallID != "" && call.CallId != f.CallID) || (f.Session != "" && c.GetSession() != f.Session) ||
		(f.Agent != "" && c.GetAgent() != f.Agent) {
		return nil, true
	}
	return s.newJob(call, m.seq, m.stored), false
}

// newJob is the job of call, stored at seq.
func (s *Source) newJob(call *toolwirev1.ToolCall, seq uint64, stored time.Time) *job {
	c := call.GetCaller()
	rec := &Record{CallID: call.CallId, Seq: seq, Time: stored, Tenant: c.GetTenant(), Agent: c.GetAgent(),
		Session: c.GetSession(), User: c.GetUser(), Run: c.GetRun(), Tool: call.Tool, SpecVersion: call.SpecVersion,
		Dispatcher: call.Dispatcher, Idempotency: call.IdempotencyKey, Admission: "accepted", Policy: policyOfCall(call)}
	rec.Call = call
	return &job{rec: rec, call: call, done: make(chan struct{})}
}

// complete looks up a call's result (and events) and redacts it.
func (s *Source) complete(ctx context.Context, j *job, o Options) error {
	call, rec := j.call, j.rec
	sch, known := s.schemaOf(ctx, call.Tool, call.SpecVersion)
	sec := redactRecord(rec, sch, known)
	subject := s.subj.ResultAnyDispatcher(call.GetCaller().GetTenant(), call.CallId)
	if call.Dispatcher != "" {
		subject = s.subj.Result(call.GetCaller().GetTenant(), call.Dispatcher, call.CallId)
	}
	st, refused, err := s.storedResults(ctx, j, subject, o.Verify)
	switch {
	case err != nil:
		return fmt.Errorf("audit: result of %s: %w", call.CallId, err)
	case st == nil:
		rec.Outcome = OutcomePending
		if o.Now().Sub(rec.Time) > o.Settle {
			rec.Outcome = OutcomeMissing
		}
	default:
		rec.Result = st.Resp
		rec.Response = redactResponse(sec, st.Resp)
		rec.Signature = signatureOf(st)
		rec.Outcome, rec.ErrorType = Classify(st.Resp)
	}
	rec.Refused = refused
	if !o.Events && !o.Verify {
		return nil
	}
	evs, err := s.readEvents(ctx, j, st)
	if err != nil {
		return err
	}
	if o.Verify {
		rec.Refused = append(rec.Refused, evs.refused...)
	}
	if o.Events {
		rec.Events = redactEvents(sec, evs.believed)
		rec.EventsNotShown = evs.notShown
	}
	return nil
}

// Classify is the outcome of a terminal response (OutcomeOK, ...) and,
// for a failure, its error type's name ("TIMEOUT").
func Classify(r *toolwirev1.ToolResponse) (string, string) {
	if r.GetOk() {
		return OutcomeOK, ""
	}
	t := r.GetError().GetType()
	name := strings.TrimPrefix(t.String(), "ERROR_TYPE_")
	switch {
	case r.GetMeta().GetSource() == "dlq" || t == toolwirev1.ErrorType_ERROR_TYPE_MAX_ATTEMPTS:
		return OutcomeDeadLettered, name
	case t == toolwirev1.ErrorType_ERROR_TYPE_CANCELLED:
		return OutcomeCancelled, name
	case t == toolwirev1.ErrorType_ERROR_TYPE_EXPIRED:
		return OutcomeExpired, name
	}
	return OutcomeError, name
}

// schemaOf returns the input schema of a spec version, and false when it
// cannot be known (the version left the registry, or the lookup failed:
// then the arguments are redacted whole). Only found schemas are cached.
func (s *Source) schemaOf(ctx context.Context, name, version string) (string, bool) {
	key := name + "@" + version
	s.specMu.Lock()
	sch, ok := s.specs[key]
	s.specMu.Unlock()
	if ok {
		return sch, true
	}
	e, err := s.registry.Get(ctx, registry.VersionKey(name, version))
	if err != nil {
		return "", false
	}
	spec := &toolwirev1.ToolSpec{}
	if proto.Unmarshal(e.Value(), spec) != nil {
		return "", false
	}
	s.specMu.Lock()
	s.specs[key] = spec.InputSchemaJson
	s.specMu.Unlock()
	return spec.InputSchemaJson, true
}

// readEvents reads a call's events, oldest first: those the archive
// holds and the events stream no longer does (with an archive), then the
// stream's by direct gets (next message of the call's subjects after the
// last one read): no consumer is created. Every dispatcher's subject of
// the call is read, not only its own dispatcher's (ToolCall.dispatcher):
// a parked call's APPROVED event is its approver's, a redeemed approval
// token's AWAITING_APPROVAL the parking replica's, and a cancel another
// replica recorded before the call had an event of its own is on that
// replica's subject; the workers read cancels on every dispatcher's
// subject too. Which events are believed does not rest on the subject:
// each one's signature is checked once, as it is read (callEvents.visit).
//
// Events that are not believed count against the read's bound
// (maxEventsRead), never against the record's (maxEvents): a worker
// credential that stores a flood of forged events on a call's subject
// cannot push the call's own events out of its record, only past
// maxEventsRead messages, and then the record names the messages it did
// not read.
func (s *Source) readEvents(ctx context.Context, j *job, st *believed.Stored) (*callEvents, error) {
	call := j.call
	subject := s.subj.EventsAnyDispatcher(call.GetCaller().GetTenant(), call.CallId)
	evs := &callEvents{s: s, call: call, st: st}
	if err := s.archivedOfCall(ctx, j, s.events, subject, evs.visitor(ctx)); err != nil {
		return nil, fmt.Errorf("audit: events of %s: %w", call.CallId, err)
	}
	for seq := uint64(1); !evs.cut; {
		m, err := s.events.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("audit: events of %s: %w", call.CallId, err)
		}
		evs.visit(ctx, m)
		seq = m.Sequence + 1
	}
	if evs.err != nil {
		return nil, fmt.Errorf("audit: events of %s: %w", call.CallId, evs.err)
	}
	evs.finish()
	return evs, nil
}

// The bounds of a record's events: it shows at most maxEvents believed
// events, reads at most maxEventsRead of the call's stored events
// (believed or not: a call's own are at most a few per attempt, its
// partial output's chunks at most tool.MaxPartialChunks an attempt, and
// progress), and names at most maxRefusedEvents that are not believed
// one by one (the rest in one line).
const (
	maxEvents        = 1000
	maxEventsRead    = 10000
	maxRefusedEvents = 100
)

// callEvents is what a record makes of a call's stored events.
type callEvents struct {
	s    *Source
	call *toolwirev1.ToolCall
	st   *believed.Stored // the call's believed result, nil for none
	// believed are the events a record shows, at most maxEvents.
	believed []*jetstream.RawStreamMsg
	// refused are the problems audit --verify names: events not believed,
	// a claim of the result's attempt by another signer, events not read.
	refused []RefusedResult
	// read counts the events read; unbelieved those not believed;
	// notShown those believed past maxEvents.
	read, unbelieved, notShown int
	// claimed is set once the claim of the result's attempt was read:
	// its first believed STARTED stored before the result.
	claimed bool
	// cut is set once an event past maxEventsRead was found (and named),
	// or an event could not be checked (err).
	cut bool
	// err says an event's signer could not be looked up: the record is
	// not made (an event neither shown nor named would hide it).
	err error
}

// visit checks m, the next of the call's events, and keeps what the
// record shows and names of it; past maxEventsRead it names m as the
// first event not read and sets cut.
func (e *callEvents) visit(ctx context.Context, m *jetstream.RawStreamMsg) {
	if e.read == maxEventsRead {
		e.refused = append(e.refused, RefusedResult{Seq: m.Sequence, Problem: "events not read",
			Detail: fmt.Sprintf("the call has more than %d stored events (%d not believed); those from this sequence on were not read", maxEventsRead, e.unbelieved)})
		e.cut = true
		return
	}
	e.read++
	ev, v, err := believed.CheckEvent(ctx, e.s.keys, e.call.CallId, e.call.Tool, m.Header, m.Data)
	if se := signing.AsError(err); se != nil {
		if e.unbelieved++; e.unbelieved <= maxRefusedEvents {
			e.refused = append(e.refused, RefusedResult{Seq: m.Sequence, Problem: "event " + string(se.Problem), Signer: se.Signer, Detail: se.Detail})
		}
		return
	}
	if err != nil {
		e.err = fmt.Errorf("event at %d: %w", m.Sequence, err)
		e.cut = true
		return
	}
	if len(e.believed) < maxEvents {
		e.believed = append(e.believed, m)
	} else {
		e.notShown++
	}
	// The claim of the result's attempt, as the workers' claim race and a
	// reader's check (internal/believed) decide it: the first believed
	// STARTED stored before the result. A STARTED that lost the race, or
	// came after the result, claims nothing.
	st := e.st
	if st == nil || st.Verdict.Dispatcher || e.claimed || st.Resp.GetMeta().GetAttempt() < 1 || ev.Type != toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED ||
		ev.Attempt != st.Resp.GetMeta().GetAttempt() || (!st.Msg.Time.IsZero() && !m.Time.Before(st.Msg.Time)) {
		return
	}
	e.claimed = true
	if v.Signer != st.Verdict.Signer {
		// A worker's believed result whose attempt another signer claimed.
		e.refused = append(e.refused, RefusedResult{Seq: st.Msg.Sequence, Problem: string(signing.WrongAttempt), Signer: st.Verdict.Signer,
			Detail: fmt.Sprintf("attempt %d was claimed (STARTED, events seq %d) by %s", ev.Attempt, m.Sequence, v.Signer)})
	}
}

// visitor is visit for archivedOfCall: it reads on until cut.
func (e *callEvents) visitor(ctx context.Context) func(*jetstream.RawStreamMsg) bool {
	return func(m *jetstream.RawStreamMsg) bool {
		e.visit(ctx, m)
		return !e.cut
	}
}

// finish names the events not believed past those named one by one.
func (e *callEvents) finish() {
	if n := e.unbelieved - maxRefusedEvents; n > 0 {
		e.refused = append(e.refused, RefusedResult{Problem: "events not believed",
			Detail: fmt.Sprintf("%d more events not believed (the first %d are named)", n, maxRefusedEvents)})
	}
}

// redactEvents is evs as protobuf JSON, redacted.
func redactEvents(sec *redact.Secrets, evs []*jetstream.RawStreamMsg) []json.RawMessage {
	var out []json.RawMessage
	for _, m := range evs {
		if b, ok := redactEvent(sec, m.Data); ok {
			out = append(out, b)
		}
	}
	return out
}

// defaultSettle is Options.Settle's default.
const defaultSettle = 10 * time.Minute

// ErrNotACall is returned by One for a CALLS message that is no call of
// its own (a retry re-entry, a replay's shadow message, an undecodable
// message).
var ErrNotACall = errors.New("audit: not a call")

// One returns the record of the call stored at seq in CALLS, with its
// events and its result (both redacted as in Run): one call's timeline
// without scanning the stream.
func (s *Source) One(ctx context.Context, seq uint64) (*Record, error) {
	m, err := s.calls.GetMsg(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("audit: call at %d: %w", seq, err)
	}
	call, kind := DecodeCall(m.Subject, m.Data, m.Header.Get(jetstream.MsgIDHeader), s.shadowPrefix)
	if kind != ACall {
		return nil, ErrNotACall
	}
	j := s.newJob(call, seq, m.Time)
	j.rec.Traceparent = m.Header.Get("traceparent")
	if err := s.complete(ctx, j, Options{Events: true, Settle: defaultSettle, Now: time.Now}); err != nil {
		return nil, err
	}
	return j.rec, nil
}
