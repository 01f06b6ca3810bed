package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The delegation records (docs/delegation.md; doc.go, "Delegation
// chains"): in the limits bucket, which every replica shares and whose
// keys carry their own TTL, one key per child under its parent
// (dlgk.<tenant>.<parent>.<child>) holding the child's link (its parent,
// root and depth), which a cancel and GetDelegation walk and a child's
// own children read; in the delegation stream (bus.Config.DelegationStream), a
// counter per parent of its children and per root of its chain's calls,
// which admission adds to and reads in one request each, shared by the
// children admitted together (countChild).
const (
	maxDelegationDepth  = 64   // the most Config.MaxDelegationDepth may be
	maxDelegationFanOut = 4096 // the most Config.MaxDelegationFanOut may be
	// maxCascade bounds the descendants one cancel reaches (beyond it the
	// rest are logged as not cancelled).
	maxCascade = 4096
	// linkMarkerTTL is the life of the marker forgetLink leaves (the
	// limits bucket's LimitMarkerTTL).
	linkMarkerTTL = time.Minute
)

// link is a delegated call's place in its chain, as its record holds it.
type link struct {
	Parent string `json:"p"`
	Root   string `json:"r"`
	Depth  int32  `json:"d"`
}

// linkKey is where releases before the link went into the child's key
// (issue 31) wrote a call's link: read when the child's key holds none.
func linkKey(tenant, callID string) string { return "dlg." + tenant + "." + callID }

func childKey(tenant, parent, child string) string {
	return "dlgk." + tenant + "." + parent + "." + child
}

// linkOf returns the link of call callID of tenant: its key's under its
// parent (found by the call's id alone: the one key dlgk.<tenant>.*.<call>,
// read from the bucket's leader), or, for a call without one, the link of
// a call at the top of its chain (depth 0, its own root). A key an older
// release wrote holds no link: its link is read from where that release
// wrote it (linkKey, written before that key, with the same TTL, and
// purged with it). callID must be a call id (a ULID: no wildcard gets
// into the filter); tenant is a checked tenant.
func (d *Dispatcher) linkOf(ctx context.Context, tenant, callID string) (link, error) {
	if _, err := ulid.ParseStrict(callID); err != nil {
		return link{}, fmt.Errorf("dispatch: delegation link of %q: not a call id", cutName(callID))
	}
	stream, err := d.limitsStream(ctx)
	if err != nil {
		return link{}, err
	}
	e, err := bus.KVMatchFromLeader(ctx, d.bus.JS, stream, childKey(tenant, "*", callID))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return link{Root: callID}, nil
	case err != nil:
		return link{}, fmt.Errorf("dispatch: read delegation link: %w", err)
	}
	v := e.Value
	if len(v) == 0 { // an older release's key
		old, err := d.bus.Limits.Get(ctx, linkKey(tenant, callID))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return link{Root: callID}, nil
		}
		if err != nil {
			return link{}, fmt.Errorf("dispatch: read delegation link: %w", err)
		}
		v = old.Value()
	}
	var l link
	if err := json.Unmarshal(v, &l); err != nil || len(v) > 256 || l.Parent == "" || l.Root == "" || l.Depth < 1 {
		return link{}, fmt.Errorf("dispatch: delegation link of %s is malformed", callID)
	}
	return l, nil
}

// recordLink writes child's key under its parent, holding its link,
// living the cancels' TTL (a tombstone lives no longer): one write.
func (d *Dispatcher) recordLink(ctx context.Context, tenant, child string, l link) error {
	v, _ := json.Marshal(l)
	if _, err := d.bus.Limits.Create(ctx, childKey(tenant, l.Parent, child), v, jetstream.KeyTTL(d.bus.Config.CancelTTL)); err != nil {
		return fmt.Errorf("dispatch: write delegation link: %w", err)
	}
	return nil
}

// forgetLink removes what recordLink wrote, for a call that was refused
// or answered as another (so that a cancel of its parent does not walk
// it). Best effort: the key expires anyway. The purge marker lives
// linkMarkerTTL (the bucket has no MaxAge: a marker without a TTL would
// stay for ever).
func (d *Dispatcher) forgetLink(ctx context.Context, tenant, child string, l link) {
	ctx = context.WithoutCancel(ctx)
	if err := d.bus.Limits.Purge(ctx, childKey(tenant, l.Parent, child), jetstream.PurgeTTL(linkMarkerTTL)); err != nil {
		d.log.WarnContext(ctx, "delegation record not removed", "call_id", child, "err", err)
	}
}

// chainCount is one of the two counts a delegated call takes a place in:
// its parent's children, or its root's chain.
type chainCount uint8

const (
	countChildren    chainCount = 1 << iota // the parent's children (delegation.max_fan_out)
	countDescendants                        // the root's chain (delegation.max_descendants)
)

// countSubject is the counter of count c for a call of tenant with link l.
func (d *Dispatcher) countSubject(tenant string, l link, c chainCount) string {
	if c == countChildren {
		return d.bus.Subjects.DelegationChildren(tenant, l.Parent)
	}
	return d.bus.Subjects.DelegationDescendants(tenant, l.Root)
}

// countChild adds a call with link l to count c and returns the count
// with it: one request, which the stream's leader answers after every
// earlier increment of the counter, whichever replica sent it
// (bus.AddToCounter). Two children racing for a parent's last place get
// two different counts: one is admitted, the other refused.
//
// The children of one parent admitted at the same time are added with
// one request (groupCommit): the counter grows by their number, and each
// takes one of the counts up to the sum it returns, so that no two get
// the same. The request does not run on the caller's context, and every
// caller waits for its answer whatever its context does (chainCounts
// waits for all, at most groupCommitWait): a caller that left after the
// server added it would hold a place never taken back.
func (d *Dispatcher) countChild(ctx context.Context, tenant string, l link, c chainCount) (int64, error) {
	subject := d.countSubject(tenant, l, c)
	add, place, err := d.chainCounts.do(ctx, subject, func(ctx context.Context, n int) (chainAdd, error) {
		total, err := bus.AddToCounter(ctx, d.bus.NC, subject, int64(n))
		return chainAdd{total: total, n: n}, err
	})
	if err != nil {
		return 0, fmt.Errorf("dispatch: count delegated call: %w", err)
	}
	return add.total - int64(add.n) + int64(place) + 1, nil
}

// chainAdd is one shared add to a chain's counter: the sum it returned,
// and how many calls it added.
type chainAdd struct {
	total int64
	n     int
}

// children returns the ids of the calls made on behalf of parent (at most
// limit+1 of them), listing their keys from the limits bucket's leader
// (bus.KVKeysFromLeader: a lister on a replica that lags would miss a
// child that wrote its key a moment ago, which the cascade's ordering
// with admission rests on): a cancel's cascade and GetDelegation walk
// them (not admission, which counts: countChild).
func (d *Dispatcher) children(ctx context.Context, tenant, parent string, limit int) ([]string, error) {
	prefix := childKey(tenant, parent, "")
	stream, err := d.limitsStream(ctx)
	if err != nil {
		return nil, err
	}
	keys, err := bus.KVKeysFromLeader(ctx, d.bus.JS, stream, prefix+"*", limit+1)
	if err != nil {
		return nil, fmt.Errorf("dispatch: list delegated calls: %w", err)
	}
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if len(k) > len(prefix) {
			out = append(out, k[len(prefix):])
		}
	}
	return out, nil
}

// limitsStream is the limits bucket's stream, looked up once (a failed
// look-up is tried again by the next caller).
func (d *Dispatcher) limitsStream(ctx context.Context) (jetstream.Stream, error) {
	d.limitsMu.Lock()
	defer d.limitsMu.Unlock()
	if d.limits != nil {
		return d.limits, nil
	}
	stream, err := d.bus.JS.Stream(ctx, "KV_"+d.bus.Config.LimitsBucket())
	if err != nil {
		return nil, fmt.Errorf("dispatch: the limits bucket's stream: %w", err)
	}
	d.limits = stream
	return stream, nil
}

// cancelDescendants cancels the calls made on behalf of callID, and
// theirs, breadth first, at most maxCascade of them, whatever each one's
// state (a finished child's own children may still run). Each is
// cancelled as Cancel would (tombstone, event, a parked one denied), by
// the canceller of the parent, whichever agent made it. A child admitted
// while this runs wrote its key before it checked its parent's tombstone
// (admit_delegation.go), and this lists the keys after writing it: the
// child is either refused or listed. A listed child that no dispatcher
// has published yet (it is still in admission: hooks, policy, an
// approval, the limits) is unknown to cancelCall; its key proves a
// dispatcher admits it, so it gets its tombstone all the same
// (tombstoneAdmitting), which its worker reads before it starts, and its
// admission looks at its parent's tombstone again right before it
// publishes (publishStep).
func (d *Dispatcher) cancelDescendants(ctx context.Context, id identity.Identity, callID, reason string) {
	queue, seen := []string{callID}, 0
	for len(queue) > 0 && seen < maxCascade {
		parent := queue[0]
		queue = queue[1:]
		kids, err := d.children(ctx, id.Tenant, parent, maxDelegationFanOut)
		if err != nil {
			d.log.WarnContext(ctx, "delegated calls not cancelled", "call_id", parent, "err", err)
			continue
		}
		for _, k := range kids {
			if _, err := ulid.ParseStrict(k); err != nil || seen >= maxCascade {
				continue
			}
			seen++
			why := "parent call " + parent + " cancelled"
			if reason != "" {
				why += ": " + reason
			}
			out, err := d.cancelCall(ctx, id, k, why)
			if err == nil && out == toolwirev1.CancelOutcome_CANCEL_OUTCOME_UNKNOWN_CALL {
				err = d.tombstoneAdmitting(ctx, id, k, why)
			}
			if err != nil {
				d.log.WarnContext(ctx, "delegated call not cancelled", "call_id", k, "parent", parent, "err", err)
			}
			queue = append(queue, k)
		}
	}
	if len(queue) > 0 {
		d.log.WarnContext(ctx, "cancel reached its bound of delegated calls", "call_id", callID, "bound", maxCascade)
	}
}

// tombstoneAdmitting writes the tombstone of a delegated call a cascade
// listed but cancelCall did not know: one still in admission. An
// existing tombstone is left as it is.
func (d *Dispatcher) tombstoneAdmitting(ctx context.Context, id identity.Identity, callID, reason string) error {
	val, _ := json.Marshal(bus.Tombstone{By: id.Agent, Reason: reason})
	_, err := d.bus.Cancels.Create(ctx, bus.CancelKey(id.Tenant, callID), val, jetstream.KeyTTL(d.bus.Config.CancelTTL))
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("dispatch: write tombstone: %w", err)
	}
	return nil
}
