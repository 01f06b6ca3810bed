package callindex

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/redact"
	"github.com/toolwire/toolwire/internal/registry"
)

// orphan is a result read before its call.
// orphan is a result stored before its call was read: kept as stored,
// and checked (internal/believed) once the call says whose tool it is.
type orphan struct {
	result believed.Msg
}

type specInfo struct {
	plan    *redact.Plan
	known   bool
	retryAt time.Time // a failed lookup is tried again from then on
}

// onCall indexes a CALLS message.
func (f *feeder) onCall(ctx context.Context, m jetstream.Msg, md *jetstream.MsgMetadata) {
	f.lagged(md, false)
	call, kind := audit.DecodeCall(m.Subject(), m.Data(), m.Headers().Get(jetstream.MsgIDHeader), f.shadow)
	switch kind {
	case audit.AnUndecodable:
		f.x.skipped.Add(1)
		f.log.Debug("calls index: undecodable call", "seq", md.Sequence.Stream)
		return
	case audit.AReplay, audit.ARetryEntry:
		return // no call of its own
	}
	id, err := ulid.ParseStrict(call.CallId)
	if err != nil {
		f.x.skipped.Add(1)
		return
	}
	plan, known := f.spec(ctx, call.Tool, call.SpecVersion)
	var args []byte
	var sec *redact.Secrets
	if known {
		args, sec = plan.Arguments(call.Arguments), plan.Secrets(call.Arguments)
	} else {
		sec = redact.AllOf(call.Arguments) // no argument text; the result's is redacted of every value
	}
	c := call.GetCaller()
	e := Entry{ID: call.CallId, Seq: md.Sequence.Stream, Time: md.Timestamp, Tenant: c.GetTenant(), Agent: c.GetAgent(),
		Session: c.GetSession(), Tool: call.Tool, Outcome: audit.OutcomePending}
	var result []byte
	key := [16]byte(id)
	o, orphaned := f.orphans.take(key)
	f.x.orphans.Store(int64(len(f.orphans.m)))
	if orphaned {
		u, text, cut, ok := f.outcomeOf(o.result, call.Tool)
		if orphaned = ok; ok {
			e.Outcome, e.ErrorType, e.Worker, e.Duration = u.outcome, u.errType, u.worker, u.dur
			result = redactResult(sec, text, cut)
		}
	}
	if !f.x.add(e, args, result, sec != nil) {
		return
	}
	if sec != nil && !orphaned {
		// The secrets hold about 1.6 times the arguments' bytes.
		f.held.put(key, sec, 2*len(call.Arguments)+64)
	}
	f.published(&key)
}

// checkTimeout bounds the enrolment lookups of one result's check.
const checkTimeout = 5 * time.Second

// outcomeOf checks a stored result of a call of tool (internal/believed)
// and returns what the index keeps of it; false when it is not the
// call's answer (logged) or could not be checked.
func (f *feeder) outcomeOf(m believed.Msg, tool string) (outcomeUpdate, []byte, bool, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	resp, _, err := believed.Check(ctx, f.streams.Keys, m, tool)
	if err != nil {
		f.log.Warn("calls index: a result that is not believed (or could not be checked) is not a call's outcome", "subject", m.Subject, "err", err)
		return outcomeUpdate{}, nil, false, false
	}
	outcome, errType := audit.Classify(resp)
	u := outcomeUpdate{outcome: outcome, errType: errType, worker: resp.GetMeta().GetWorker(), dur: resp.GetMeta().GetDuration().AsDuration()}
	text, cut := resultText(resp)
	return u, text, cut, true
}

// onResult records a RESULTS message on its call.
func (f *feeder) onResult(_ context.Context, m jetstream.Msg, md *jetstream.MsgMetadata) {
	f.lagged(md, true)
	if replayResult(m.Subject()) {
		return // a replay's, whose call is no call of the list: no orphan
	}
	subject := m.Subject()
	id, err := ulid.ParseStrict(subject[strings.LastIndexByte(subject, '.')+1:])
	if err != nil {
		return
	}
	key := [16]byte(id)
	found, secret, tool := f.x.callOf(&key)
	if !found {
		f.orphans.put(key, orphan{result: believed.ConsumedMsg(m)}, len(m.Data())+64)
		f.x.orphans.Store(int64(len(f.orphans.m)))
		return
	}
	u, text, cut, ok := f.outcomeOf(believed.ConsumedMsg(m), tool)
	if !ok {
		return
	}
	if secret {
		sec, ok := f.held.take(key)
		if !ok {
			text, u.keepText = nil, true // its secrets are gone: fail closed
		} else {
			text = redactResult(sec, text, cut)
		}
	}
	if f.x.setOutcome(&key, u, text) {
		f.published(&key)
	}
}

// replayResult reports whether a results subject is a replay's
// (<prefix>.result.<tenant>.replay.<call id>).
func replayResult(subject string) bool {
	i := strings.LastIndexByte(subject, '.')
	return i >= 0 && strings.HasSuffix(subject[:i], "."+bus.ReplayDispatcher)
}

// published hands the call to live subscribers, once past the rebuild.
func (f *feeder) published(id *[16]byte) {
	if !f.live || !f.x.hasSubscribers() {
		return
	}
	if e, ok := f.x.Get(ulid.ULID(*id).String()); ok {
		f.x.publish(e)
	}
}

// spec returns the redaction plan of a spec version (nil: nothing is
// secret) and whether the version is known; lookups are cached, failed
// ones for specRetry.
func (f *feeder) spec(ctx context.Context, name, version string) (*redact.Plan, bool) {
	key := name + "@" + version
	if s, ok := f.specs[key]; ok && (s.known || s.retryAt.IsZero() || time.Now().Before(s.retryAt)) {
		return s.plan, s.known
	}
	if len(f.specs) >= maxSpecs {
		clear(f.specs)
	}
	info := f.lookup(ctx, name, version)
	f.specs[key] = info
	return info.plan, info.known
}

func (f *feeder) lookup(ctx context.Context, name, version string) specInfo {
	if version == "" {
		return specInfo{} // no version to redact by: never indexed
	}
	if f.x.specs == nil {
		return specInfo{retryAt: time.Now().Add(specRetry)}
	}
	ctx, cancel := context.WithTimeout(ctx, specTimeout)
	defer cancel()
	e, err := f.x.specs.GetVersion(ctx, name, version)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		return specInfo{} // left the registry: for good
	case err != nil:
		f.log.Debug("calls index: spec lookup failed; no argument text for now", "tool", name, "version", version, "err", err)
		return specInfo{retryAt: time.Now().Add(specRetry)}
	}
	return specInfo{plan: redact.ForSpec(e.Spec), known: true}
}
