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

// Apply applies the intents of the response of callID to a session: in
// order, skipping any already applied (by "<call_id>/<intent_id>"), in one
// compare-and-set update that is retried on conflict. It returns the
// session after the update and how many intents it applied and skipped.
// An intent whose payload is invalid fails the whole Apply; nothing is
// applied.
func (a *Applier) Apply(ctx context.Context, tenant, session, callID string, in []*toolwirev1.Intent) (*toolwirev1.Session, int, int, error) {
	if session == "" {
		return nil, 0, 0, errors.New("intents: no session to apply to")
	}
	if !bus.ValidTenant(tenant) {
		return nil, 0, 0, fmt.Errorf("intents: tenant %q does not match %s", tenant, bus.TenantPattern)
	}
	for i, it := range in {
		if it.GetId() == "" {
			return nil, 0, 0, fmt.Errorf("intents: intent %d (%s) has no id", i+1, it.GetType())
		}
		if err := checkPayload(it); err != nil {
			return nil, 0, 0, fmt.Errorf("intents: intent %s (%s): %w", it.GetId(), it.GetType(), err)
		}
	}
	key := SessionKey(tenant, session)
	for range a.cfg.MaxAttempts {
		s, rev, err := a.load(ctx, tenant, session)
		if err != nil {
			return nil, 0, 0, err
		}
		seen := make(map[string]bool, len(s.Applied))
		for _, k := range s.Applied {
			seen[k] = true
		}
		applied, skipped := 0, 0
		now := timestamppb.Now()
		for _, it := range in {
			k := callID + "/" + it.GetId()
			if seen[k] {
				skipped++
				continue
			}
			seen[k] = true
			apply(s, it)
			s.Applied = append(s.Applied, k)
			s.Log = append(s.Log, &toolwirev1.AppliedIntent{CallId: callID, IntentId: it.GetId(), Type: it.GetType(),
				PayloadJson: it.GetPayloadJson(), AppliedAt: now})
			applied++
		}
		if applied == 0 {
			return s, 0, skipped, nil
		}
		s.Applied = tail(s.Applied, a.cfg.Remember)
		s.Log = trimLog(tail(s.Log, a.cfg.MaxLog))
		if n := stateBytes(s); n > MaxStateBytes {
			return nil, 0, 0, fmt.Errorf("%w: %d bytes of state values, at most %d", ErrSessionFull, n, MaxStateBytes)
		}
		s.Revision++
		s.UpdatedAt = now
		b, err := proto.Marshal(s)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("intents: encode session: %w", err)
		}
		if rev == 0 {
			_, err = a.kv.Create(ctx, key, b)
		} else {
			_, err = a.kv.Update(ctx, key, b, rev)
		}
		switch {
		case err == nil:
			return s, applied, skipped, nil
		case errors.Is(err, jetstream.ErrKeyExists) || bus.IsWrongLastSequence(err):
			// Another applier won the race: reload and re-apply on its state.
			select {
			case <-ctx.Done():
				return nil, 0, 0, ctx.Err()
			default:
			}
			continue
		default:
			return nil, 0, 0, fmt.Errorf("intents: update session: %w", err)
		}
	}
	return nil, 0, 0, ErrContention
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
