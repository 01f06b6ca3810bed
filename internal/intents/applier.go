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
	"strconv"
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

// MaxLogBytes bounds the payload bytes a session's log keeps (the oldest
// entries go first), and MaxStateBytes the SET_STATE values of a session:
// a session is one KV value, under the server's payload limit.
const (
	MaxLogBytes   = 256 << 10
	MaxStateBytes = 512 << 10
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
// the spec version of the tool that returned them.
type Response struct {
	CallID  string
	Intents []*toolwirev1.Intent
	// Spec is the spec version of the tool that returned the intents,
	// which Apply screens them against (Screen); nil declares none.
	Spec *toolwirev1.ToolSpec
	// NoSpec, when not empty, says why the tool's spec version is not
	// known: every intent is refused with it.
	NoSpec string
}

// Outcome is what one Apply did.
type Outcome struct {
	// Session is the session after the update.
	Session *toolwirev1.Session
	// Applied and Skipped count the intents applied now and the ones
	// applied before.
	Applied, Skipped int
	// Refused are the intents screened out, each with its reason (every
	// time; the session's log records each once).
	Refused []Refusal
	// Recorded counts the refusals recorded in the session's log now
	// (the others were recorded by an earlier Apply).
	Recorded int
}

// Apply applies the intents of one call's response to a session: it
// screens them against the tool's spec version (Screen) and applies the
// ones that pass, in order, skipping any already applied (by
// "<call_id>/<intent_id>"), in one compare-and-set update that is retried
// on conflict. Each refused intent is recorded in the session's log with
// its reason (AppliedIntent.refused), once (by "<call_id>!<index>"), and
// changes nothing else.
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
	key := SessionKey(tenant, session)
	for range a.cfg.MaxAttempts {
		s, rev, err := a.load(ctx, tenant, session)
		if err != nil {
			return Outcome{}, err
		}
		out := Outcome{Session: s, Refused: refused}
		if !a.update(s, r, &out) {
			return out, nil
		}
		if n := stateBytes(s); n > MaxStateBytes {
			return Outcome{}, fmt.Errorf("%w: %d bytes of state values, at most %d", ErrSessionFull, n, MaxStateBytes)
		}
		b, err := proto.Marshal(s)
		if err != nil {
			return Outcome{}, fmt.Errorf("intents: encode session: %w", err)
		}
		if rev == 0 {
			_, err = a.kv.Create(ctx, key, b)
		} else {
			_, err = a.kv.Update(ctx, key, b, rev)
		}
		switch {
		case err == nil:
			return out, nil
		case errors.Is(err, jetstream.ErrKeyExists) || bus.IsWrongLastSequence(err):
			// Another applier won the race: reload and re-apply on its state.
			select {
			case <-ctx.Done():
				return Outcome{}, ctx.Err()
			default:
			}
			continue
		default:
			return Outcome{}, fmt.Errorf("intents: update session: %w", err)
		}
	}
	return Outcome{}, ErrContention
}

// update applies r's intents that out.Refused does not name to s, in
// order, and logs the refusals not logged before, counting into out. It
// reports whether s changed.
func (a *Applier) update(s *toolwirev1.Session, r Response, out *Outcome) bool {
	why := make(map[int]string, len(out.Refused))
	for _, rf := range out.Refused {
		why[rf.Index] = rf.Reason
	}
	seen := make(map[string]bool, len(s.Applied))
	for _, k := range s.Applied {
		seen[k] = true
	}
	changed := false
	now := timestamppb.Now()
	for i, it := range r.Intents {
		reason, refused := why[i]
		k := r.CallID + "/" + it.GetId()
		if refused {
			// "!" never follows a call id in an applied intent's key.
			k = r.CallID + "!" + strconv.Itoa(i)
		}
		if seen[k] {
			if !refused {
				out.Skipped++
			}
			continue
		}
		seen[k] = true
		s.Applied = append(s.Applied, k)
		changed = true
		if refused {
			e := Refusal{Index: i, Intent: it, Reason: reason}.Entry(r.CallID)
			e.AppliedAt = now
			s.Log = append(s.Log, e)
			out.Recorded++
			continue
		}
		apply(s, it)
		s.Log = append(s.Log, &toolwirev1.AppliedIntent{CallId: r.CallID, IntentId: it.GetId(), Type: it.GetType(),
			PayloadJson: it.GetPayloadJson(), AppliedAt: now})
		out.Applied++
	}
	if changed {
		s.Applied = tail(s.Applied, a.cfg.Remember)
		s.Log = trimLog(tail(s.Log, a.cfg.MaxLog))
		s.Revision++
		s.UpdatedAt = now
	}
	return changed
}

// maxRefusedField bounds the id, type and reason a log entry keeps of a
// refused intent, which nothing checked; its payload is kept when within
// MaxPayloadBytes.
const maxRefusedField = 1024

// Entry is the refusal as the session's log records it (without the
// time), for callID's response.
func (r Refusal) Entry(callID string) *toolwirev1.AppliedIntent {
	e := &toolwirev1.AppliedIntent{CallId: callID, IntentId: cut(r.Intent.GetId()), Type: cut(r.Intent.GetType()),
		PayloadJson: r.Intent.GetPayloadJson(), Refused: cut(r.Reason)}
	if len(e.PayloadJson) > MaxPayloadBytes {
		e.PayloadJson = ""
	}
	return e
}

func cut(s string) string {
	if len(s) <= maxRefusedField {
		return s
	}
	return strings.ToValidUTF8(s[:maxRefusedField], "")
}

// trimLog drops the oldest entries past MaxLogBytes of payloads.
func trimLog(log []*toolwirev1.AppliedIntent) []*toolwirev1.AppliedIntent {
	total := 0
	for i := len(log) - 1; i >= 0; i-- {
		total += len(log[i].GetPayloadJson())
		if total > MaxLogBytes {
			return append(log[:0:0], log[i+1:]...)
		}
	}
	return log
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
		s.Ended, s.EndReason = true, str("reason")
	case SuppressAudio:
		s.SuppressAudio = flag("suppress")
	case SuppressTranscript:
		s.SuppressTranscript = flag("suppress")
	case SetPendingMessage:
		s.PendingMessage = str("message")
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
