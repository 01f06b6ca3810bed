package intents

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// ApplierConfig configures an Applier.
type ApplierConfig struct {
	// Remember is how many applied intent keys a session keeps to skip
	// repeats. Default 4096: a redelivered response is skipped as long as
	// fewer than that many intents were applied to the session since.
	Remember int
	// MaxLog is how many applied intents a session's log keeps. Default 256.
	MaxLog int
	// MaxAttempts bounds the compare-and-set retries of one Apply under
	// contention. Default 100.
	MaxAttempts int
}

func (c ApplierConfig) withDefaults() ApplierConfig {
	c.Remember = cmp.Or(c.Remember, 4096)
	c.MaxLog = cmp.Or(c.MaxLog, 256)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, 100)
	return c
}

// MaxLogBytes bounds a session's log, its entries as encoded (the oldest
// go first), MaxAppliedBytes its applied keys (the oldest go first, even
// when fewer than ApplierConfig.Remember), and MaxStateBytes its SET_STATE
// values: a session is one KV value, under the server's payload limit
// (1 MiB by default).
const (
	MaxLogBytes     = 256 << 10
	MaxAppliedBytes = 192 << 10
	MaxStateBytes   = 512 << 10
)

// ErrSessionFull: applying would take the session's state past
// MaxStateBytes; nothing is applied.
var ErrSessionFull = errors.New("intents: the session's state is full")

// ErrContention is returned when Apply lost every compare-and-set race.
var ErrContention = errors.New("intents: session updated concurrently too often; try again")

// Applier is the reference intent applier: it keeps session states in a KV
// bucket and applies the intents of a response to them in order, each
// exactly once, by compare-and-set, so that many agent services (and
// dispatcher replicas) share one consistent view of a session.
type Applier struct {
	kv  jetstream.KeyValue
	cfg ApplierConfig
}

// NewApplier returns an Applier over the sessions bucket kv.
func NewApplier(kv jetstream.KeyValue, cfg ApplierConfig) *Applier {
	return &Applier{kv: kv, cfg: cfg.withDefaults()}
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// SessionKey is the bucket key of a tenant's session: "<tenant>.<session>"
// when the session id is a plain token, otherwise "<tenant>.=" followed by
// the unpadded base64url form of its SHA-256 ("=" is a legal key character
// no plain token has), so that no session id can reach another key and
// none is too long for one. Get and Apply refuse a tenant that is not
// bus.ValidTenant rather than map it.
func SessionKey(tenant, session string) string {
	if plainKey.MatchString(session) {
		return bus.Token(tenant) + "." + session
	}
	sum := sha256.Sum256([]byte(session))
	return bus.Token(tenant) + ".=" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// Get returns the state of a session; a session never written is empty
// (revision 0).
func (a *Applier) Get(ctx context.Context, tenant, session string) (*toolwirev1.Session, error) {
	s, _, err := a.load(ctx, tenant, session)
	return s, err
}

func (a *Applier) load(ctx context.Context, tenant, session string) (*toolwirev1.Session, uint64, error) {
	if !bus.ValidTenant(tenant) {
		return nil, 0, fmt.Errorf("intents: tenant %q does not match %s", tenant, bus.TenantPattern)
	}
	e, err := a.kv.Get(ctx, SessionKey(tenant, session))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return &toolwirev1.Session{Tenant: tenant, Session: session, StateJson: map[string]string{}}, 0, nil
	case err != nil:
		return nil, 0, fmt.Errorf("intents: load session: %w", err)
	}
	s := &toolwirev1.Session{}
	if err := proto.Unmarshal(e.Value(), s); err != nil {
		return nil, 0, fmt.Errorf("intents: session %q is undecodable: %w", session, err)
	}
	if s.StateJson == nil {
		s.StateJson = map[string]string{}
	}
	return s, e.Revision(), nil
}

// Response is what Apply applies: the intents of one call's response and
// the spec version the call was admitted with.
type Response struct {
	CallID  string
	Intents []*toolwirev1.Intent
	// Spec is the spec version the call was admitted with (taken from the
	// call, never from the response), which Apply screens the intents
	// against (Screen); nil declares none.
	Spec *toolwirev1.ToolSpec
	// NoSpec, when not empty, says why the tool's spec version is not
	// known: every intent is refused with it.
	NoSpec string
	// SetsMode says the identity applying the intents holds the authority
	// to set a session's mode (SetSessionMode's: the admin scope). Without
	// it a SET_MODE intent is refused: a tool's result is a worker's
	// word, and an agent applying it must not lift its own session's mode.
	SetsMode bool
}

// modeRefusal is why a SET_MODE intent applied without the authority is
// refused.
const modeRefusal = "SET_MODE needs the authority to set a session's mode (the admin scope), which the identity applying it does not hold"

// refuseModes adds a refusal for every SET_MODE intent of in not refused
// already.
func refuseModes(in []*toolwirev1.Intent, refused []Refusal) []Refusal {
	done := make(map[int]bool, len(refused))
	for _, r := range refused {
		done[r.Index] = true
	}
	for i, it := range in {
		if it.GetType() == SetMode && !done[i] {
			refused = append(refused, Refusal{Index: i, Intent: it, Reason: modeRefusal})
		}
	}
	return refused
}

// Outcome is what one Apply did.
type Outcome struct {
	// Session is the session after the update.
	Session *toolwirev1.Session
	// Applied and Skipped count the intents applied now and the ones
	// applied before.
	Applied, Skipped int
	// Refused are the intents screened out, each with its reason (every
	// time; the session's log records them once, in one entry: Summary).
	Refused []Refusal
	// Recorded counts the refusals the session's log recorded now: all of
	// them, or none when an earlier Apply recorded them.
	Recorded int
}

// Apply applies the intents of one call's response to a session: it
// screens them against the tool's spec version (Screen) and applies the
// ones that pass, in order, skipping any already applied (by
// "<call_id>/<intent_id>"), in one compare-and-set update that is retried
// on conflict. The refused intents change nothing but the log: one entry
// per call (Summary), recorded once while the log keeps it, and no key in
// the applied list, so that no number of refusals pushes applied intents
// out of the session's memory.
func (a *Applier) Apply(ctx context.Context, tenant, session string, r Response) (Outcome, error) {
	if session == "" {
		return Outcome{}, errors.New("intents: no session to apply to")
	}
	if !bus.ValidTenant(tenant) {
		return Outcome{}, fmt.Errorf("intents: tenant %q does not match %s", tenant, bus.TenantPattern)
	}
	var refused []Refusal
	if r.NoSpec != "" {
		refused = RefuseAll(r.Intents, r.NoSpec)
	} else {
		_, refused = Screen(r.Spec, r.Intents)
	}
	if !r.SetsMode {
		refused = refuseModes(r.Intents, refused)
	}
	var out Outcome
	err := a.modify(ctx, tenant, session, func(s *toolwirev1.Session) (bool, error) {
		out = Outcome{Session: s, Refused: refused}
		if !a.update(s, r, &out) {
			return false, nil
		}
		if n := stateBytes(s); n > MaxStateBytes {
			return false, fmt.Errorf("%w: %d bytes of state values, at most %d", ErrSessionFull, n, MaxStateBytes)
		}
		return true, nil
	})
	if err != nil {
		return Outcome{}, err
	}
	return out, nil
}

// modify loads a session, lets change change it, and writes it back by
// compare-and-set on its revision, retried (change runs again on the
// fresh state) while another writer wins the race, up to MaxAttempts
// (ErrContention). change reports whether it changed s; an error of
// change stops it, nothing written.
func (a *Applier) modify(ctx context.Context, tenant, session string, change func(s *toolwirev1.Session) (bool, error)) error {
	key := SessionKey(tenant, session)
	for range a.cfg.MaxAttempts {
		s, rev, err := a.load(ctx, tenant, session)
		if err != nil {
			return err
		}
		changed, err := change(s)
		if err != nil || !changed {
			return err
		}
		b, err := proto.Marshal(s)
		if err != nil {
			return fmt.Errorf("intents: encode session: %w", err)
		}
		if rev == 0 {
			_, err = a.kv.Create(ctx, key, b)
		} else {
			_, err = a.kv.Update(ctx, key, b, rev)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, jetstream.ErrKeyExists) || bus.IsWrongLastSequence(err):
			// Another writer won the race: reload and change its state.
			select {
			case <-ctx.Done():
				return ctx.Err()
			default:
			}
			continue
		default:
			return fmt.Errorf("intents: update session: %w", err)
		}
	}
	return ErrContention
}

// update applies r's intents that out.Refused does not name to s, in
// order, and logs the refusals (one Summary entry) unless the log holds
// them already, counting into out. It reports whether s changed.
func (a *Applier) update(s *toolwirev1.Session, r Response, out *Outcome) bool {
	refused := make(map[int]bool, len(out.Refused))
	for _, rf := range out.Refused {
		refused[rf.Index] = true
	}
	seen := make(map[string]bool, len(s.Applied))
	for _, k := range s.Applied {
		seen[k] = true
	}
	changed := false
	now := timestamppb.Now()
	for i, it := range r.Intents {
		if refused[i] {
			continue
		}
		k := r.CallID + "/" + it.GetId()
		if seen[k] {
			out.Skipped++
			continue
		}
		seen[k] = true
		s.Applied = append(s.Applied, k)
		changed = true
		apply(s, it)
		s.Log = append(s.Log, &toolwirev1.AppliedIntent{CallId: r.CallID, IntentId: it.GetId(), Type: it.GetType(),
			PayloadJson: it.GetPayloadJson(), AppliedAt: now})
		out.Applied++
	}
	if len(out.Refused) > 0 && !refusalsLogged(s.Log, r.CallID) {
		e := Summary(r.CallID, out.Refused)
		e.AppliedAt = now
		s.Log = append(s.Log, e)
		out.Recorded = len(out.Refused)
		changed = true
	}
	if changed {
		s.Applied = tailKeys(s.Applied, a.cfg.Remember)
		s.Log = trimLog(tail(s.Log, a.cfg.MaxLog))
		s.Revision++
		s.UpdatedAt = now
	}
	return changed
}

// RefusedEntryID is the intent_id of a log entry that records the refused
// intents of one call (Summary); no intent an executor names has it.
const RefusedEntryID = "!refused"

// Bounds of what the log and the API keep of refused intents, which
// nothing checked: an entry's id, type and reason are cut to
// maxRefusedField bytes, a summary names the first summaryReasons
// refusals (each reason cut to maxSummaryReason) in at most
// maxSummaryBytes.
const (
	maxRefusedField  = 1024
	summaryReasons   = 4
	maxSummaryReason = 256
	maxSummaryBytes  = 2048
)

// refusalsLogged reports whether log holds the refusal summary of callID.
func refusalsLogged(log []*toolwirev1.AppliedIntent, callID string) bool {
	for _, e := range log {
		if e.GetCallId() == callID && e.GetIntentId() == RefusedEntryID && e.GetRefused() != "" {
			return true
		}
	}
	return false
}

// Summary is the one log entry that records the refused intents of
// callID's response (without the time): intent_id RefusedEntryID, refused
// saying how many and why the first summaryReasons were (at most
// maxSummaryBytes), and payload_json {"count":N,"sha256":"..."}, the
// SHA-256 of the refused intents as encoded (deterministic protobuf, one
// after another), so that the entry can be matched to a stored result.
// No refused payload is kept.
func Summary(callID string, refused []Refusal) *toolwirev1.AppliedIntent {
	var b strings.Builder
	if len(refused) == 1 {
		b.WriteString("1 intent refused")
	} else {
		fmt.Fprintf(&b, "%d intents refused", len(refused))
	}
	h := sha256.New()
	opts := proto.MarshalOptions{Deterministic: true}
	for i, r := range refused {
		if data, err := opts.Marshal(r.Intent); err == nil {
			h.Write(data)
		}
		if i < summaryReasons {
			fmt.Fprintf(&b, "; #%d (%s, id %q): %s", r.Index+1, cutTo(r.Intent.GetType(), 64), cutTo(r.Intent.GetId(), 64),
				cutTo(r.Reason, maxSummaryReason))
		}
	}
	if len(refused) > summaryReasons {
		fmt.Fprintf(&b, "; and %d more", len(refused)-summaryReasons)
	}
	return &toolwirev1.AppliedIntent{CallId: callID, IntentId: RefusedEntryID, Refused: cutTo(b.String(), maxSummaryBytes),
		PayloadJson: fmt.Sprintf(`{"count":%d,"sha256":"%x"}`, len(refused), h.Sum(nil))}
}

// Entry is the refusal as the API answers it (without the time), for
// callID's response: its id, type and reason, each cut to 1 KiB, and no
// payload (the stored result has it).
func (r Refusal) Entry(callID string) *toolwirev1.AppliedIntent {
	return &toolwirev1.AppliedIntent{CallId: callID, IntentId: cut(r.Intent.GetId()), Type: cut(r.Intent.GetType()),
		Refused: cut(r.Reason)}
}

func cut(s string) string { return cutTo(s, maxRefusedField) }

func cutTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

// trimLog drops the oldest entries past MaxLogBytes of encoded entries.
func trimLog(log []*toolwirev1.AppliedIntent) []*toolwirev1.AppliedIntent {
	total := 0
	for i := len(log) - 1; i >= 0; i-- {
		total += proto.Size(log[i])
		if total > MaxLogBytes {
			return append(log[:0:0], log[i+1:]...)
		}
	}
	return log
}

// tailKeys keeps the last n applied keys, and of those no more than
// MaxAppliedBytes.
func tailKeys(keys []string, n int) []string {
	keys = tail(keys, n)
	total := 0
	for i := len(keys) - 1; i >= 0; i-- {
		total += len(keys[i])
		if total > MaxAppliedBytes {
			return append(keys[:0:0], keys[i+1:]...)
		}
	}
	return keys
}

func stateBytes(s *toolwirev1.Session) int {
	n := 0
	for k, v := range s.StateJson {
		n += len(k) + len(v)
	}
	return n
}

func tail[T any](s []T, n int) []T {
	if len(s) <= n {
		return s
	}
	return append(s[:0:0], s[len(s)-n:]...)
}

// apply makes the state change of one intent (payload already checked).
func apply(s *toolwirev1.Session, it *toolwirev1.Intent) {
	var p map[string]json.RawMessage
	_ = json.Unmarshal([]byte(cmp.Or(it.GetPayloadJson(), "{}")), &p)
	str := func(k string) string {
		var v string
		_ = json.Unmarshal(p[k], &v)
		return v
	}
	flag := func(k string) bool {
		v := true
		if raw, ok := p[k]; ok {
			_ = json.Unmarshal(raw, &v)
		}
		return v
	}
	switch it.GetType() {
	case EndSession:
		if !s.Ended { // the first end stands: its reason is the session's
			s.Ended, s.EndReason = true, str("reason")
		}
	case SuppressAudio:
		s.SuppressAudio = flag("suppress")
	case SuppressTranscript:
		s.SuppressTranscript = flag("suppress")
	case SetPendingMessage:
		s.PendingMessage = str("message")
	case SetMode:
		s.Mode = str("mode")
	case SetState:
		k := str("key")
		v := bytes.TrimSpace(p["value"])
		if bytes.Equal(v, []byte("null")) {
			delete(s.StateJson, k)
			return
		}
		var c bytes.Buffer
		if json.Compact(&c, v) == nil {
			s.StateJson[k] = c.String()
		}
	}
	// EMIT_EVENT, NOTIFY, INJECT_CONTEXT and custom intents change no
	// field: the log is their record, for the orchestrator to act on.
}
