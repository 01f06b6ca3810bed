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

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/poolview"
	"github.com/toolwire/toolwire/internal/telemetry"
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
// VisibilityOwn, its agent's: idemKey) to the call for the key's lifetime
// (the bucket's TTL, bus.Config.IdempotencyTTL), beyond the stream's
// duplicate window. When the key is already bound the call goes no
// further: the same tool and arguments (and answers) are a Duplicate of
// the original call, anything else CONFLICT, naming the original call
// (the caller's to see: idemKey). The waiter, if any, is released then.
//
// A store the call writes that is nearly full (poolview.Load.CheckStores:
// for a keyed call the idempotency store too) is asked about before the
// claim, so that its refusal writes nothing: the key is only read, a bound
// key still answers its call, and an unbound one is refused OVERLOADED
// with retry_after. A claim the store refuses because it filled since its
// use was last read is refused the same way (poolview.FullRefusal), never
// an error; it wrote nothing either.
func (a *admission) idempotency(ctx context.Context) verdict {
	d := a.d
	if a.req.IdempotencyKey == "" {
		return next
	}
	claim := d.claimKey
	te, cause, target := d.load.CheckStores(true)
	if te != nil {
		claim = d.boundKey
	}
	s, err := claim(ctx, a.id, a.call)
	if bus.StoreFull(err) {
		te, cause, target, err = poolview.FullRefusal(idempotencyStore), telemetry.OverloadStore, idempotencyStore, nil
	}
	switch {
	case err == nil && s == nil && te == nil:
		a.claimed = true
		return next
	case err == nil && s == nil:
		a.overloaded, a.target = cause, target
		return a.refused(te, nil)
	}
	if a.w != nil {
		a.w.cancel()
	}
	return a.answered(s, nil, err)
}

// idempotencyStore is the idempotency bucket's name among the stores
// (bus.Config.Stores).
const idempotencyStore = "idempotency"

// claimKey binds the call's key to it: nil when it did, else the answer
// (a Duplicate, or the CONFLICT refusal) or the error (bus.StoreFull: the
// bucket refused the key, and holds nothing new).
func (d *Dispatcher) claimKey(ctx context.Context, id identity.Identity, call *toolwirev1.ToolCall) (*Submitted, error) {
	rec, val := keyRecordOf(call)
	key := idemKey(id, d.cfg.AgentVisibility, call.IdempotencyKey)
	_, err := d.bus.Idempotency.Create(ctx, key, val)
	switch {
	case err == nil:
		return nil, nil
	case !errors.Is(err, jetstream.ErrKeyExists):
		return nil, fmt.Errorf("dispatch: claim idempotency key: %w", err)
	}
	s, err := d.keyAnswer(ctx, key, rec, call.CallId)
	if err == nil && s == nil {
		// Bound when it was claimed, gone when read: released since.
		return nil, fmt.Errorf("dispatch: idempotency key released while it was read: %w", jetstream.ErrKeyNotFound)
	}
	return s, err
}

// boundKey is claimKey without the claim, for a call a full store
// refuses: the answer when the call's key is bound, nil when it is not.
// It writes nothing.
func (d *Dispatcher) boundKey(ctx context.Context, id identity.Identity, call *toolwirev1.ToolCall) (*Submitted, error) {
	rec, _ := keyRecordOf(call)
	return d.keyAnswer(ctx, idemKey(id, d.cfg.AgentVisibility, call.IdempotencyKey), rec, call.CallId)
}

// keyRecordOf is the record that binds call's key to it, and its JSON.
func keyRecordOf(call *toolwirev1.ToolCall) (keyRecord, []byte) {
	sum := sha256.Sum256(call.Arguments)
	rec := keyRecord{CallID: call.CallId, Tool: call.Tool, ArgsHash: hex.EncodeToString(sum[:]), Round: roundDigest(call.Input)}
	val, _ := json.Marshal(rec)
	return rec, val
}

// keyAnswer reads bound key: nil when it is not bound, else the answer to
// the call callID that carries it with rec (a Duplicate of the call the
// key is bound to, or CONFLICT).
func (d *Dispatcher) keyAnswer(ctx context.Context, key string, rec keyRecord, callID string) (*Submitted, error) {
	e, err := d.bus.Idempotency.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
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
		return &Submitted{CallID: callID, Rejected: envelope.Rejection(callID, rec.Tool, te, time.Now())}, nil
	}
	return &Submitted{CallID: orig.CallID, Duplicate: true}, nil
}

// releaseKey unbinds a key whose call could not be queued, so a retry with
// the same key is not pointed at a call that never existed. It purges the
// key's subject from the bucket's stream, which leaves nothing behind: a
// KV delete would leave a deletion marker for the key's lifetime, and
// under a refused keyed call per marker the markers would fill the store.
func (d *Dispatcher) releaseKey(id identity.Identity, o *toolwirev1.CallRequest) {
	if o.IdempotencyKey == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	bucket := d.bus.Config.IdempotencyBucket()
	err := d.keyStreamHandle(ctx)
	if err == nil {
		err = d.keyStream.Load().Purge(ctx, jetstream.WithPurgeSubject("$KV."+bucket+"."+idemKey(id, d.cfg.AgentVisibility, o.IdempotencyKey)))
	}
	if err != nil {
		d.log.Warn("releasing idempotency key failed", "err", err)
	}
}

// keyStreamOf holds the idempotency bucket's stream.
type keyStreamOf struct{ jetstream.Stream }

// keyStreamHandle looks the idempotency bucket's stream up once
// (d.keyStream).
func (d *Dispatcher) keyStreamHandle(ctx context.Context) error {
	if d.keyStream.Load() != nil {
		return nil
	}
	st, err := d.bus.JS.Stream(ctx, "KV_"+d.bus.Config.IdempotencyBucket())
	if err != nil {
		return fmt.Errorf("dispatch: idempotency stream: %w", err)
	}
	d.keyStream.CompareAndSwap(nil, &keyStreamOf{st})
	return nil
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
