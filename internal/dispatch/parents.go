package dispatch

import (
	"context"
	"sync"
	"time"

	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// seenParent is what a delegated call's admission keeps of a parent it
// found on its way after it was published (parentsSeen): what never
// changes about a call once it is published.
type seenParent struct {
	tenant string
	tool   string // the parent's tool (callTool)
	result string // the subject its result is stored on (its admitter's)
	link   link   // its own place in its chain (linkOf), read once it was published
	until  time.Time
}

// parentsSeen remembers, by call id, the parents this replica's
// admissions found published and without a result (doc.go, "Delegation
// chains"): the next child of the same parent reads the one literal
// subject its result is stored on, where the first read the parent's
// result and events on every dispatcher's subjects (two stream-info
// requests to resolve them, a signature to check) and its link. Whether
// the parent has finished, and its tombstone, are read for every child:
// nothing remembered here changes with the parent's state. Bounded:
// cleared when full; an entry lives parentSeenFor, and is dropped when
// this replica's results consumer sees the parent's result or a child
// finds it.
type parentsSeen struct {
	mu sync.Mutex
	m  map[string]seenParent
}

const (
	maxParentsSeen = 1 << 14
	// parentSeenFor is how long a parent is remembered.
	parentSeenFor = time.Minute
)

// get returns the parent callID of tenant as remembered.
func (p *parentsSeen) get(tenant, callID string) (seenParent, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.m[callID]
	if !ok || s.tenant != tenant || time.Now().After(s.until) {
		return seenParent{}, false
	}
	return s, true
}

// put remembers parent callID for parentSeenFor.
func (p *parentsSeen) put(callID string, s seenParent) {
	s.until = time.Now().Add(parentSeenFor)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil || len(p.m) >= maxParentsSeen {
		p.m = map[string]seenParent{}
	}
	p.m[callID] = s
}

// forget drops callID, a call that has (or may have) its result.
func (p *parentsSeen) forget(callID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, callID)
}

// parentLookTimeout bounds one read of a parent's records (lookParent),
// which the children that wait for it share.
const parentLookTimeout = 10 * time.Second

// parentLook is what one read of a parent's records found: its state
// and, when it is on its way, its tool.
type parentLook struct {
	state toolwirev1.CallState
	tool  string
}

// lookParent reads the records of parent, a call of id's tenant that id
// may see (reachParent): its state, as GetResult tells it, and its tool.
// The children of one parent admitted at the same time share one read
// (a fan-out's first children would each read them otherwise, before
// the first could remember it): a child that joins a read under way gets
// a state read at most that read's time before its own admission. The
// read runs on a goroutine of its own, bounded by parentLookTimeout
// whoever waits for it; each child waits for it only as long as its own
// context lasts. A parent found published is remembered (parentsSeen).
func (d *Dispatcher) lookParent(ctx context.Context, id identity.Identity, parent string) (parentLook, error) {
	ch := d.parentLooks.DoChan(toolKey(id.Tenant, parent), func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), parentLookTimeout)
		defer cancel()
		return d.readParent(ctx, id, parent)
	})
	select {
	case r := <-ch:
		p, _ := r.Val.(parentLook)
		return p, r.Err
	case <-ctx.Done():
		return parentLook{}, ctx.Err()
	}
}

// readParent is lookParent's read. A parent is remembered when it is
// pending and known stored in the calls stream (callTools.route: this
// replica's publish of it was acknowledged, or it was read from the
// stream): published, so neither in admission nor parked, and never
// refused at its publish (a REJECTED record, never a result, would end
// it). Its link is read then, once the parent is known published: its
// key was written in its own admission, before its publish.
func (d *Dispatcher) readParent(ctx context.Context, id identity.Identity, parent string) (parentLook, error) {
	r, err := d.getResult(ctx, resultQuery{id: id, callID: parent})
	if err != nil {
		return parentLook{}, err
	}
	p := parentLook{state: r.State}
	if p.state != toolwirev1.CallState_CALL_STATE_PENDING {
		return p, nil
	}
	if p.tool, err = d.callTool(ctx, id.Tenant, parent); err != nil {
		return parentLook{}, err
	}
	route := d.tools.route(toolKey(id.Tenant, parent))
	if p.tool == "" || route == "" {
		return p, nil // not known stored in the calls stream: perhaps still in admission, or refused at its publish
	}
	if pl, err := d.linkOf(ctx, id.Tenant, parent); err == nil {
		d.parents.put(parent, seenParent{tenant: id.Tenant, tool: p.tool, result: d.subj.Result(id.Tenant, route, parent), link: pl})
	}
	return p, nil
}
