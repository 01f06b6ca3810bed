package dispatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// keyRecord is what the idempotency bucket holds per key.
type keyRecord struct {
	CallID   string `json:"call_id"`
	Tool     string `json:"tool"`
	ArgsHash string `json:"args_sha256"`
	// Round is the digest of the round a call answering a tool's request
	// for input continues (roundDigest); empty for other calls.
	Round string `json:"round,omitempty"`
}

// idemKey is the bucket key of id's idempotency key under v: the
// tenant's key (VisibilityTenant), or under VisibilityOwn the agent's
// (another agent's key is another key: it never names a call the caller
// may not see). A tenant is a plain token, so the byte after it tells the
// two apart, and the agent is length-prefixed.
func idemKey(id identity.Identity, v identity.Visibility, key string) string {
	var sum [sha256.Size]byte
	if v == identity.VisibilityOwn {
		sum = sha256.Sum256([]byte(id.Tenant + "\x01" + strconv.Itoa(len(id.Agent)) + ":" + id.Agent + key))
	} else {
		sum = sha256.Sum256([]byte(id.Tenant + "\x00" + key))
	}
	return hex.EncodeToString(sum[:])
}

// idempotency is the step that binds a tenant's idempotency key (under
// VisibilityOwn, its agent's: idemKey) to the call for the audit horizon
// (the bucket's TTL), beyond the stream's duplicate window. When the key
// is already bound the call goes no further: the same tool and arguments
// (and answers) are a Duplicate of the original call, anything else
// CONFLICT, naming the original call (the caller's to see: idemKey).
// The waiter, if any, is released then.
func (a *admission) idempotency(ctx context.Context) verdict {
	d := a.d
	if a.req.IdempotencyKey == "" {
		return next
	}
	s, err := d.claimKey(ctx, a.id, a.call)
	if err == nil && s == nil {
		a.claimed = true
		return next
	}
	if a.w != nil {
		a.w.cancel()
	}
	return a.answered(s, nil, err)
}

// claimKey binds the call's key to it: nil when it did, else the answer
// (a Duplicate, or the CONFLICT refusal) or the error.
func (d *Dispatcher) claimKey(ctx context.Context, id identity.Identity, call *toolwirev1.ToolCall) (*Submitted, error) {
	sum := sha256.Sum256(call.Arguments)
	rec := keyRecord{CallID: call.CallId, Tool: call.Tool, ArgsHash: hex.EncodeToString(sum[:]), Round: roundDigest(call.Input)}
	val, _ := json.Marshal(rec)
	key := idemKey(id, d.cfg.AgentVisibility, call.IdempotencyKey)
	_, err := d.bus.Idempotency.Create(ctx, key, val)
	switch {
	case err == nil:
		return nil, nil
	case !errors.Is(err, jetstream.ErrKeyExists):
		return nil, fmt.Errorf("dispatch: claim idempotency key: %w", err)
	}
	e, err := d.bus.Idempotency.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("dispatch: read idempotency key: %w", err)
	}
	var orig keyRecord
	if err := json.Unmarshal(e.Value(), &orig); err != nil {
		return nil, fmt.Errorf("dispatch: decode idempotency key: %w", err)
	}
	// The call a key is bound to is always one the caller may see: under
	// VisibilityOwn the key is its agent's (idemKey), so it is named.
	if orig.Tool != rec.Tool || orig.ArgsHash != rec.ArgsHash || orig.Round != rec.Round {
		te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_CONFLICT,
			fmt.Sprintf("idempotency key already used by call %s with other arguments or answers", orig.CallID))
		te.Suggestion = "use a new idempotency key for different arguments"
		return &Submitted{CallID: call.CallId, Rejected: envelope.Rejection(call.CallId, call.Tool, te, time.Now())}, nil
	}
	return &Submitted{CallID: orig.CallID, Duplicate: true}, nil
}

// releaseKey unbinds a key whose call could not be queued, so a retry with
// the same key is not pointed at a call that never existed.
func (d *Dispatcher) releaseKey(id identity.Identity, o *toolwirev1.CallRequest) {
	if o.IdempotencyKey == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.bus.Idempotency.Delete(ctx, idemKey(id, d.cfg.AgentVisibility, o.IdempotencyKey)); err != nil {
		d.log.Warn("releasing idempotency key failed", "err", err)
	}
}

// roundDigest is a digest of the round in: the call it continues and the
// answers; empty for none.
func roundDigest(in *toolwirev1.InputRound) string {
	if in == nil {
		return ""
	}
	h := sha256.New()
	h.Write([]byte(in.GetPreviousCallId()))
	for _, k := range slices.Sorted(maps.Keys(in.GetResponsesJson())) {
		h.Write([]byte{0})
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(in.GetResponsesJson()[k]))
	}
	return hex.EncodeToString(h.Sum(nil))
}
