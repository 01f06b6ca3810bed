package believed

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// Msg is a stored result as Check reads it: its subject, headers,
// payload and the time its stream stored it (zero when unknown: then
// every claim of its attempt counts, whenever it was stored).
type Msg struct {
	Subject string
	Header  nats.Header
	Data    []byte
	Stored  time.Time
}

// MsgOf is m as Check reads it.
func MsgOf(m *jetstream.RawStreamMsg) Msg {
	return Msg{Subject: m.Subject, Header: m.Header, Data: m.Data, Stored: m.Time}
}

// ConsumedMsg is m, a result a consumer delivered, as Check reads it.
func ConsumedMsg(m jetstream.Msg) Msg {
	var stored time.Time
	if md, err := m.Metadata(); err == nil {
		stored = md.Timestamp
	}
	return Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data(), Stored: stored}
}

// Check decides whether m, a result stored on a call's result subject, is
// believed as the answer of its call. tool is the call's tool as the
// reader knows it from what only dispatchers write (the call it
// admitted, the stored call, a tracked admission record): the pool whose
// key may sign is that tool's, never the tool the result names. With
// tool "" only a dispatcher's signature is believed. It returns the
// decoded result and the signer's verdict, a *signing.Error for a result
// that is not believed, or another error when a lookup failed (nothing
// is decided).
func Check(ctx context.Context, keys *signing.Keyring, m Msg, tool string) (*toolwirev1.ToolResponse, signing.Verdict, error) {
	callID := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	resp := &toolwirev1.ToolResponse{}
	if err := proto.Unmarshal(m.Data, resp); err != nil {
		return nil, signing.Verdict{}, &signing.Error{Problem: signing.WrongCall, Signer: m.Header.Get(signing.HeaderSigner), Detail: "the result does not decode"}
	}
	if resp.CallId != callID || (tool != "" && resp.Tool != tool) {
		return nil, signing.Verdict{}, &signing.Error{Problem: signing.WrongCall, Signer: m.Header.Get(signing.HeaderSigner),
			Detail: fmt.Sprintf("stored for call %s of tool %q, names call %q tool %q", limit(callID), limit(tool), limit(resp.CallId), limit(resp.Tool))}
	}
	attempt := resp.GetMeta().GetAttempt()
	v, err := keys.Check(ctx, m.Header, signing.KindResult, callID, attempt, m.Data, tool)
	if err == nil && v.Pool != "" {
		err = checkClaim(ctx, keys, claim{result: m, callID: callID, tool: tool, attempt: attempt, verdict: v})
	}
	if err != nil {
		return nil, v, err
	}
	return resp, v, nil
}

// claim is a pool key's result whose attempt's claim is checked.
type claim struct {
	result       Msg
	callID, tool string
	attempt      int32
	verdict      signing.Verdict
}

// MaxClaimScan bounds how many of a call's events a claim check reads
// (the audit's bound on a record's events): a call whose claim lies past
// it is not decided (an error that is not a *signing.Error), never taken
// as unclaimed, since events anyone with a worker credential can store
// would otherwise push the claim out of reach.
const MaxClaimScan = 10_000

// checkClaim refuses (signing.WrongAttempt) a result a pool's key signed
// for an attempt whose claim another key holds (a key of the pool's or a
// dispatcher's): the claim is the first believed STARTED of that attempt
// (the lowest stream sequence) among the call's events on every
// dispatcher's subject stored before the result (by the servers' clocks),
// as the workers' claim race decides it. A STARTED stored after the
// result does not count, so what a reader decides of a stored result
// does not change when a later event comes. A pool with one enrolled key
// (signing.Keyring.SoleKey) and a keyring without an events reader skip
// the read; an attempt nobody claimed passes (a call of a tool safe to
// rerun stores no STARTED unless it runs long). An error that is not a
// *signing.Error says the events could not be read or checked.
func checkClaim(ctx context.Context, keys *signing.Keyring, c claim) error {
	read := keys.Events()
	if read == nil || c.attempt < 1 || keys.SoleKey(ctx, c.verdict.Pool, c.verdict.Signer) {
		return nil // attempts are numbered from 1: 0 names none, and nothing claims it
	}
	found, ok := keys.Claimed(callKey(c.result.Subject), c.attempt)
	if !ok || !storedBefore(found.Time, c.result.Stored) {
		var err error
		if found, err = readClaim(ctx, keys, read, c); err != nil {
			return fmt.Errorf("believed: the claim of attempt %d of call %s: %w", c.attempt, limit(c.callID), err)
		}
	}
	if found.Signer != "" && found.Signer != c.verdict.Signer {
		return &signing.Error{Problem: signing.WrongAttempt, Signer: c.verdict.Signer,
			Detail: fmt.Sprintf("attempt %d was claimed (STARTED, events seq %d) by %s", c.attempt, found.Seq, found.Signer)}
	}
	return nil
}

// callKey names the call of the result subject subject for the claims a
// keyring remembers: its tenant and call id tokens, not its dispatcher's
// (every dispatcher's events of the call are read).
func callKey(subject string) string {
	parts := strings.Split(subject, ".")
	if len(parts) < 3 {
		return subject
	}
	return parts[len(parts)-3] + "." + parts[len(parts)-1]
}

// storedBefore reports whether a message stored at t was stored before
// the result stored at result (every message is, when result is
// unknown).
func storedBefore(t, result time.Time) bool {
	return result.IsZero() || t.Before(result)
}

// readClaim reads the claim of c's attempt from the call's events with
// read (checkClaim), and remembers one it found; a zero Claim when none
// was stored before c's result.
func readClaim(ctx context.Context, keys *signing.Keyring, read signing.EventsReader, c claim) (signing.Claim, error) {
	var (
		found  signing.Claim
		lookup error
	)
	complete, err := read(ctx, c.result.Subject, MaxClaimScan, func(m *jetstream.RawStreamMsg) bool {
		if !storedBefore(m.Time, c.result.Stored) {
			return false // stored after the result, as all after it on this subject
		}
		ev, v, err := CheckEvent(ctx, keys, c.callID, c.tool, m.Header, m.Data)
		switch {
		case signing.AsError(err) != nil:
			return true // not believed: no claim
		case err != nil:
			lookup = err
			return false
		case ev.Type == toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED && ev.Attempt == c.attempt:
			if found.Signer == "" || m.Sequence < found.Seq {
				found = signing.Claim{Signer: v.Signer, Seq: m.Sequence, Time: m.Time}
			}
			return false // the first on this subject; another dispatcher's may be earlier
		}
		return true
	})
	switch {
	case err != nil:
		return signing.Claim{}, err
	case lookup != nil:
		return signing.Claim{}, lookup
	case !complete:
		return signing.Claim{}, fmt.Errorf("more than %d events stored before its claim", MaxClaimScan)
	}
	if found.Signer != "" {
		keys.RememberClaim(callKey(c.result.Subject), c.attempt, found)
	}
	return found, nil
}

// WorkerEvent reports whether a worker writes events of type t (an
// attempt's); every other event (admission, approval, cancel) is only
// believed from a dispatcher.
func WorkerEvent(t toolwirev1.CallEventType) bool {
	switch t {
	case toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED, toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS,
		toolwirev1.CallEventType_CALL_EVENT_TYPE_RETRYING, toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED:
		return true
	}
	return false
}

// CheckEvent decides whether data, an event of call callID stored with
// headers h, is believed: an attempt's event (WorkerEvent) signed by a
// dispatcher's key or a key enrolled for the pool of tool (the call's,
// as for Check), any other event signed by a dispatcher's key; about
// callID (and tool, when the event names one). Errors are as Check's.
func CheckEvent(ctx context.Context, keys *signing.Keyring, callID, tool string, h nats.Header, data []byte) (*toolwirev1.CallEvent, signing.Verdict, error) {
	ev := &toolwirev1.CallEvent{}
	if err := proto.Unmarshal(data, ev); err != nil {
		return nil, signing.Verdict{}, &signing.Error{Problem: signing.WrongCall, Signer: h.Get(signing.HeaderSigner), Detail: "the event does not decode"}
	}
	if ev.CallId != callID || (tool != "" && ev.Tool != "" && ev.Tool != tool) {
		return nil, signing.Verdict{}, &signing.Error{Problem: signing.WrongCall, Signer: h.Get(signing.HeaderSigner),
			Detail: fmt.Sprintf("stored for call %s of tool %q, names call %q tool %q", limit(callID), limit(tool), limit(ev.CallId), limit(ev.Tool))}
	}
	poolTool := tool
	if !WorkerEvent(ev.Type) {
		poolTool = "" // a dispatcher's only
	}
	v, err := keys.Check(ctx, h, signing.KindEvent, callID, ev.Attempt, data, poolTool)
	if err != nil {
		return nil, v, err
	}
	return ev, v, nil
}

// Stored is a call's believed result as a reader found it.
type Stored struct {
	Msg     *jetstream.RawStreamMsg
	Resp    *toolwirev1.ToolResponse
	Verdict signing.Verdict
}

// GetResp is s's result; nil for a nil s.
func (s *Stored) GetResp() *toolwirev1.ToolResponse {
	if s == nil {
		return nil
	}
	return s.Resp
}

// Refused is a result found on a call's subject and not believed.
type Refused struct {
	Subject  string
	Sequence uint64
	Err      *signing.Error
}

// Reader reads calls' believed results from the results stream, from
// its leader (a replica that lags would say "none" for a result the
// leader acknowledged).
type Reader struct {
	JS     jetstream.JetStream
	Stream jetstream.Stream
	Keys   *signing.Keyring
	// OnRefused, when set, hears every result found and not believed.
	OnRefused func(Refused)
}

// MaxScan bounds how many messages on one call's result subject a read
// looks at: a call has one result, and a subject holding more than this
// many forgeries before its answer is read as having none (each one was
// refused and reported).
const MaxScan = 256

// Read returns the first believed result stored on filter (a call's
// result subject, the dispatcher token a wildcard or not), nil when there
// is none. tool is as for Check. It reads the messages on the subject
// oldest first and stops at the first believed: one read for a call's one
// result. The publishers (Publish) store a result only while none is
// believed, so it is the call's answer for every reader.
func (r Reader) Read(ctx context.Context, filter, tool string) (*Stored, error) {
	_, found, lookupErr, err := r.scan(ctx, filter, tool, false)
	if err != nil {
		return nil, err
	}
	if found == nil && lookupErr != nil && signing.AsError(lookupErr) == nil {
		return nil, lookupErr
	}
	return found, nil
}

// check is Check of a stored message, telling OnRefused of a refusal.
func (r Reader) check(ctx context.Context, m *jetstream.RawStreamMsg, tool string) (*Stored, error) {
	resp, v, err := Check(ctx, r.Keys, MsgOf(m), tool)
	if err == nil {
		return &Stored{Msg: m, Resp: resp, Verdict: v}, nil
	}
	if se := signing.AsError(err); se != nil && r.OnRefused != nil {
		r.OnRefused(Refused{Subject: m.Subject, Sequence: m.Sequence, Err: se})
	}
	return nil, err
}

// ErrAnswered is what Publish returns when a believed result is stored
// already: the call's answer, which msg does not replace. It matches
// bus.IsWrongLastSequence, as a publish that found its subject taken did
// before results were signed.
var ErrAnswered = errors.New("believed: the call has a believed result already")

// Publish stores msg, a signed result of a call of tool, as the call's
// result unless a believed one is stored already (ErrAnswered). A subject
// holding only results that are not believed (forgeries) does not stop
// it: msg is stored after the last of them (ExpectLastSequencePerSubject,
// tried again while others are stored meanwhile, at most publishTries
// times). Any other error says msg was not stored, or may not have been.
func (r Reader) Publish(ctx context.Context, msg *nats.Msg, tool string) (*jetstream.PubAck, error) {
	expect := uint64(0)
	for try := 1; ; try++ {
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, fmt.Sprint(expect))
		ack, err := r.JS.PublishMsg(ctx, msg)
		if err == nil || !bus.IsWrongLastSequence(err) {
			return ack, err
		}
		last, found, lookupErr, rerr := r.scan(ctx, msg.Subject, tool, true)
		switch {
		case found != nil:
			return nil, answered{err}
		case rerr != nil:
			return nil, fmt.Errorf("believed: publish %s: the stored results could not be read: %w", msg.Subject, rerr)
		case lookupErr != nil && signing.AsError(lookupErr) == nil:
			return nil, fmt.Errorf("believed: publish %s: %w", msg.Subject, lookupErr)
		case try >= publishTries:
			return nil, fmt.Errorf("believed: publish %s: results not believed keep arriving (%d tries)", msg.Subject, try)
		}
		expect = last
	}
}

// scan reads the stored results on subject (a filter): the first
// believed one (found), else the sequence of the last one checked and
// refused (last), after which Publish may store. The newest message is
// checked too when the scan did not reach it — one past MaxScan
// forgeries, or one stored since the scan began — if the scan saw any
// message, or always when empty is set (Publish). A publish the server
// is still replicating is not readable yet, yet it fails a publish
// expecting the subject empty: a worker's own first publish, left
// unacknowledged and sent again on reconnect, was found that way after a
// scan that saw nothing, and a second answer was stored after it
// unchecked (a partition fault test).
func (r Reader) scan(ctx context.Context, subject, tool string, empty bool) (last uint64, found *Stored, lookupErr, err error) {
	_, err = bus.EachMsgFromLeader(ctx, r.JS, r.Stream, subject, MaxScan, func(m *jetstream.RawStreamMsg) bool {
		last = m.Sequence
		found, lookupErr = r.check(ctx, m, tool)
		return found == nil && signing.AsError(lookupErr) != nil
	})
	if err != nil || found != nil || (lookupErr != nil && signing.AsError(lookupErr) == nil) || (last == 0 && !empty) {
		return last, found, lookupErr, err
	}
	m, err := bus.LastMsgFromLeader(ctx, r.JS, r.Stream, subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return last, nil, lookupErr, nil
	case err != nil:
		return last, nil, lookupErr, err
	case m.Sequence <= last:
		return last, nil, lookupErr, nil
	}
	found, lookupErr = r.check(ctx, m, tool)
	return m.Sequence, found, lookupErr, nil
}

// answered is ErrAnswered with the server's wrong-last-sequence error.
type answered struct{ wrongLast error }

func (a answered) Error() string   { return ErrAnswered.Error() }
func (a answered) Unwrap() []error { return []error{ErrAnswered, a.wrongLast} }

// publishTries bounds Publish's tries past forgeries stored meanwhile.
const publishTries = 5

func limit(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
