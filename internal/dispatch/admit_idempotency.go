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
	Tool     string `json:"tool,omitempty"`
	ArgsHash string `json:"args_sha256,omitempty"`
	// Round is the digest of the round a call answering a tool's request
	// for input continues (roundDigest); empty for other calls.
	Round string `json:"round,omitempty"`
	// Refused marks a key whose call was refused before it ran and whose
	// release failed (releaseKey): the key is free, and the next call
	// with it takes it over.
	Refused bool `json:"refused,omitempty"`
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
// What admission can tell before the claim is asked before it, so that
// its refusal writes nothing: a nearly full store the call writes (for a
// keyed call the idempotency store too) and, for a call that is to be
// published now (not parked for an approver, not redeeming a token), its
// pool's load (poolview.Load.Peek: the overload step's check, counting
// nothing). Then the key is only read: a bound key still answers its
// call, and an unbound one is refused OVERLOADED with retry_after, with
// no key, no REJECTED event, no release. A claim the store refuses
// because it filled since its use was last read is refused the same way
// (poolview.FullRefusal), never an error; it wrote nothing either. A key
// that keeps changing hands while it is claimed (claimKey) is refused
// OVERLOADED with retry_after 1s, never an error.
func (a *admission) idempotency(ctx context.Context) verdict {
	d := a.d
	if a.req.IdempotencyKey == "" {
		return next
	}
	var s *Submitted
	var err error
	te, cause, target := a.beforeClaim(ctx)
	if te != nil {
		s, err = d.boundKey(ctx, a.id, a.call)
	} else {
		s, a.keyRev, err = d.claimKey(ctx, a.id, a.call)
	}
	switch {
	case bus.StoreFull(err):
		te, cause, target, err = poolview.FullRefusal(idempotencyStore), telemetry.OverloadStore, idempotencyStore, nil
	case errors.Is(err, errKeyBusy):
		s, err = a.keyBusy(), nil
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

// beforeClaim is the OVERLOADED refusal admission can give a keyed call
// before its key is claimed, its cause and target; nil when there is
// none. The archive being behind (archiveLag.refusal) refuses any call;
// a call that is parked or redeems a token is not published now: only
// the stores are asked then.
func (a *admission) beforeClaim(ctx context.Context) (te *toolwirev1.ToolError, cause, target string) {
	if te, cause, target := a.d.lag.refusal(ctx); te != nil {
		return te, cause, target
	}
	if a.ask != nil {
		return a.d.load.CheckStores(true)
	}
	return a.d.load.Peek(ctx, a.loadRequest())
}

// keyBusy is the answer to a call whose key kept changing hands while it
// was claimed (errKeyBusy): OVERLOADED, retry in a second; not recorded,
// since it claimed nothing.
func (a *admission) keyBusy() *Submitted {
	te := envelope.Overloaded("the idempotency key is being bound or released by other calls right now", time.Second)
	te.Suggestion = "retry with the same key after retry_after"
	return &Submitted{CallID: a.callID, Rejected: envelope.Rejection(a.callID, a.req.Tool, te, a.now)}
}

// idempotencyStore is the idempotency bucket's name among the stores
// (bus.Config.Stores).
const idempotencyStore = "idempotency"

// keyClaimAttempts bounds claimKey's attempts at a key that another call
// holds when it is written and has released when it is read.
const keyClaimAttempts = 3

// errKeyBusy: the key was claimed by another call at every attempt to
// claim it, and released (or taken over) by the time it was read.
var errKeyBusy = errors.New("dispatch: idempotency key kept changing hands")

// claimKey binds the call's key to it: nil and the revision of its
// record when it did, else the answer (a Duplicate, or the CONFLICT
// refusal) or the error (bus.StoreFull: the bucket refused the key, and
// holds nothing new; errKeyBusy). A key bound when it is written but gone
// when it is read was released (or expired) meanwhile: it is claimed
// again, at most keyClaimAttempts times. A key marked Refused (its call
// was refused and its release failed) is taken over by a conditional
// update, which fails if another call took it first.
func (d *Dispatcher) claimKey(ctx context.Context, id identity.Identity, call *toolwirev1.ToolCall) (*Submitted, uint64, error) {
	rec, val := keyRecordOf(call)
	key := idemKey(id, d.cfg.AgentVisibility, call.IdempotencyKey)
	for range keyClaimAttempts {
		rev, err := d.bus.Idempotency.Create(ctx, key, val)
		switch {
		case err == nil:
			return nil, rev, nil
		case !errors.Is(err, jetstream.ErrKeyExists):
			return nil, 0, fmt.Errorf("dispatch: claim idempotency key: %w", err)
		}
		orig, rev, err := d.readKey(ctx, key)
		switch {
		case err != nil:
			return nil, 0, err
		case orig == nil:
			continue // released since the create failed: claim it again
		case !orig.Refused:
			return answerKey(*orig, rec, call.CallId), 0, nil
		}
		rev, err = d.bus.Idempotency.Update(ctx, key, val, rev)
		switch {
		case err == nil:
			return nil, rev, nil
		case !errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			return nil, 0, fmt.Errorf("dispatch: take over idempotency key: %w", err)
		}
	}
	return nil, 0, errKeyBusy
}

// boundKey is claimKey without the claim, for a call refused before it:
// the answer when the call's key is bound, nil when it is not (or bound
// to a call refused before it ran). It writes nothing.
func (d *Dispatcher) boundKey(ctx context.Context, id identity.Identity, call *toolwirev1.ToolCall) (*Submitted, error) {
	rec, _ := keyRecordOf(call)
	orig, _, err := d.readKey(ctx, idemKey(id, d.cfg.AgentVisibility, call.IdempotencyKey))
	if err != nil || orig == nil || orig.Refused {
		return nil, err
	}
	return answerKey(*orig, rec, call.CallId), nil
}

// keyRecordOf is the record that binds call's key to it, and its JSON.
func keyRecordOf(call *toolwirev1.ToolCall) (keyRecord, []byte) {
	sum := sha256.Sum256(call.Arguments)
	rec := keyRecord{CallID: call.CallId, Tool: call.Tool, ArgsHash: hex.EncodeToString(sum[:]), Round: roundDigest(call.Input)}
	val, _ := json.Marshal(rec)
	return rec, val
}

// readKey reads key: its record and revision, nil when it is not bound.
func (d *Dispatcher) readKey(ctx context.Context, key string) (*keyRecord, uint64, error) {
	e, err := d.bus.Idempotency.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("dispatch: read idempotency key: %w", err)
	}
	var orig keyRecord
	if err := json.Unmarshal(e.Value(), &orig); err != nil {
		return nil, 0, fmt.Errorf("dispatch: decode idempotency key: %w", err)
	}
	return &orig, e.Revision(), nil
}

// answerKey is the answer to the call callID that carries a key bound
// with orig, its own record being rec: a Duplicate of the call the key is
// bound to, or CONFLICT.
func answerKey(orig, rec keyRecord, callID string) *Submitted {
	// The call a key is bound to is always one the caller may see: under
	// VisibilityOwn the key is its agent's (idemKey), so it is named.
	if orig.Tool != rec.Tool || orig.ArgsHash != rec.ArgsHash || orig.Round != rec.Round {
		te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_CONFLICT,
			fmt.Sprintf("idempotency key already used by call %s with other arguments or answers", orig.CallID))
		te.Suggestion = "use a new idempotency key for different arguments"
		return &Submitted{CallID: callID, Rejected: envelope.Rejection(callID, rec.Tool, te, time.Now())}
	}
	return &Submitted{CallID: orig.CallID, Duplicate: true}
}

// releaseKey unbinds a key whose call could not be queued, its claim
// having had revision rev, so that a retry with the same key is not
// pointed at a call that never existed. It purges the key's subject from
// the bucket's stream up to and including rev (a purge's sequence is
// "up to but not including"), which leaves nothing behind (a KV delete
// would leave a deletion marker for the key's lifetime, and under a
// refused keyed call per marker the markers would fill the store) and
// never removes a newer claim of the key (one made after this claim
// expired). When the purge fails, the record is marked Refused by an
// update conditional on rev (a publish, not an API request), so that the
// next call with the key takes it over (claimKey) rather than being
// answered with this refusal for the key's lifetime; when that fails
// too, the key answers with the refused call until it expires.
func (d *Dispatcher) releaseKey(id identity.Identity, o *toolwirev1.CallRequest, rev uint64) {
	if o.IdempotencyKey == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	key := idemKey(id, d.cfg.AgentVisibility, o.IdempotencyKey)
	err := d.purgeKey(ctx, key, rev)
	if err == nil {
		return
	}
	marked, _ := json.Marshal(keyRecord{CallID: "", Refused: true})
	_, uerr := d.bus.Idempotency.Update(ctx, key, marked, rev)
	switch {
	case uerr == nil:
		d.log.Warn("releasing idempotency key failed; marked free for the next call with it", "err", err)
	case errors.Is(uerr, jetstream.ErrKeyRevisionMismatch):
		// Gone or claimed anew: the purge did its work, or need not.
	default:
		d.log.Warn("releasing idempotency key failed; it answers with the refused call until it expires", "err", err, "mark_err", uerr)
	}
}

// purgeKey purges key's subject from the idempotency bucket's stream up
// to and including revision rev.
func (d *Dispatcher) purgeKey(ctx context.Context, key string, rev uint64) error {
	if hook := d.beforePurge.Load(); hook != nil { // a test's (FailKeyPurges)
		if err := (*hook)(); err != nil {
			return err
		}
	}
	if err := d.keyStreamHandle(ctx); err != nil {
		return err
	}
	subject := "$KV." + d.bus.Config.IdempotencyBucket() + "." + key
	if err := d.keyStream.Load().Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(rev+1)); err != nil {
		return fmt.Errorf("dispatch: purge idempotency key: %w", err)
	}
	return nil
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
