package dispatch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/startstop"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// MissFirstResultLook makes the first stored-result lookup of d's next
// Watch find nothing, as when a result reached core subscribers before
// the Watch subscribed and the stream had not stored it yet at its first
// look (the server stores asynchronously, so a test cannot pin that
// interleaving otherwise). Call it before d serves anything.
func MissFirstResultLook(d *Dispatcher) {
	var missed atomic.Bool
	look := d.loadResult
	d.lookResult = func(ctx context.Context, subject, tool string) (*toolwirev1.ToolResponse, error) {
		if missed.CompareAndSwap(false, true) {
			return nil, nil
		}
		return look(ctx, subject, tool)
	}
}

// HoldStop makes d's next Stop wait, besides everything d started, for
// release to be called, as when a goroutine of d is slow to end (a
// server read during an outage). Call it after Start.
func HoldStop(d *Dispatcher) (release func()) {
	held := make(chan struct{})
	hold := &startstop.Funcs{StopFunc: func() <-chan struct{} { return held }}
	d.mu.Lock()
	defer d.mu.Unlock()
	// Stopped first: the group Start started has started already, so
	// starting g starts hold only.
	g := startstop.NewGroup(startstop.Named{Name: "dispatcher", Service: d.group}, startstop.Named{Name: "held by a test", Service: hold})
	if err := g.Start(context.Background()); err != nil {
		panic(err)
	}
	d.group = g
	return sync.OnceFunc(func() { close(held) })
}

// StopAfterNextApprovals makes d stop after recording its next n
// approvals, before finishing them (the nonce, the events, the publish),
// as a replica killed right after its compare-and-set would: the
// approval sweep must publish them. Call it after Start.
func StopAfterNextApprovals(d *Dispatcher, n int32) {
	var left atomic.Int32
	left.Store(n)
	hook := func() error {
		if left.Add(-1) >= 0 {
			return errors.New("dispatch: stopped after the decision (test)")
		}
		return nil
	}
	d.beforeFinish.Store(&hook)
}

// AgentOfEvents is the agent d places call callID of tenant with when
// neither its memory nor a stored call has it: its events' (eventAgent).
func AgentOfEvents(ctx context.Context, d *Dispatcher, tenant, callID string) (string, error) {
	return d.eventAgent(ctx, tenant, callID)
}

// RememberedOwners is how many calls' agents d remembers (callAgent).
func RememberedOwners(d *Dispatcher) int {
	d.owners.mu.Lock()
	defer d.owners.mu.Unlock()
	return len(d.owners.tools)
}

// FailKeyPurges makes every release of an idempotency key by d fail at
// its purge, as when the JetStream API refuses or drops the request.
func FailKeyPurges(d *Dispatcher) {
	hook := func() error { return errors.New("dispatch: purge refused (test)") }
	d.beforePurge.Store(&hook)
}

// ReleaseKey releases id's key of o as the call whose claim had revision
// rev does (releaseKey): a late release, say.
func ReleaseKey(d *Dispatcher, id identity.Identity, o *toolwirev1.CallRequest, rev uint64) {
	d.releaseKey(id, o, rev)
}

// KeyName is the idempotency bucket's key for id's key k (idemKey).
func KeyName(d *Dispatcher, id identity.Identity, k string) string {
	return idemKey(id, d.cfg.AgentVisibility, k)
}

// RecordLinkForTest writes child's delegation records under parent, as
// the delegation step of a child still in admission has.
func RecordLinkForTest(ctx context.Context, d *Dispatcher, tenant, child, parent string) error {
	return d.recordLink(ctx, tenant, child, link{Parent: parent, Root: parent, Depth: 1})
}

// RecordCancelRequest stores a CANCEL_REQUESTED of call callID of id's
// tenant (of tool) on its admitting replica's events subject, as Cancel
// does, without its tombstone and without answering it: what a worker
// that missed the tombstone finds when it reads back its STARTED.
func RecordCancelRequest(ctx context.Context, d *Dispatcher, id identity.Identity, callID, tool, reason string) bool {
	q := eventQuery{tenant: id.Tenant, callID: callID, tool: tool}
	_, at, err := d.newestEventAt(ctx, q)
	if err != nil {
		return false
	}
	return d.eventOn(ctx, d.cancelSubject(ctx, q, at), callID, &toolwirev1.CallEvent{CallId: callID,
		Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_CANCEL_REQUESTED, Message: reason, Caller: &toolwirev1.Caller{Tenant: id.Tenant, Agent: id.Agent}})
}

// RecordLatencyOverrun stores a LATENCY_BUDGET_EXCEEDED of call callID of
// id's tenant on d's own events subject, as a replica other than the
// admitting one does when the call overruns its latency budget there: the
// call's newest event is then on d's subject, not its admitter's.
func RecordLatencyOverrun(ctx context.Context, d *Dispatcher, id identity.Identity, callID string) bool {
	return d.eventOn(ctx, d.subj.Event(id.Tenant, d.cfg.Name, callID), callID, &toolwirev1.CallEvent{CallId: callID,
		Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_LATENCY_BUDGET_EXCEEDED, Caller: &toolwirev1.Caller{Tenant: id.Tenant, Agent: id.Agent}})
}

// RemembersParent tells whether d remembers call callID of tenant as a
// parent found published (parentsSeen): its next child reads only its
// result's subject.
func RemembersParent(d *Dispatcher, tenant, callID string) bool {
	_, ok := d.parents.get(tenant, callID)
	return ok
}

// LinkOf is d's read of call callID's delegation link (chain.go linkOf):
// its parent, root and depth.
func LinkOf(ctx context.Context, d *Dispatcher, tenant, callID string) (parent, root string, depth int32, err error) {
	l, err := d.linkOf(ctx, tenant, callID)
	return l.Parent, l.Root, l.Depth, err
}
