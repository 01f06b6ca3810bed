package limitgate

import (
	"context"
	"sync"
	"time"

	"github.com/toolwire/toolwire/internal/limits"
)

// slotHolder tracks the concurrency slots of the calls this replica
// published until their results come (Settle): the gate renews their
// leases and releases them. A replica that dies holds them until their
// leases end.
type slotHolder struct {
	mu    sync.Mutex
	calls map[string]*heldSlots
	// closed: Stop began; no release starts any more (their leases end
	// them).
	closed bool
	work   sync.WaitGroup // releases under way
}

type heldSlots struct {
	tool  string // the call's
	keys  []limits.Key
	until time.Time // renewed until then at most
}

// Hold starts renewing the slots t took, for its call, which is being
// published: until Settle (its result came), Unhold (it was not
// published after all), its deadline (plus a renewal) or, without one,
// Config.MaxSlotHold. Hold before the publish: a fast call's result can
// reach the results consumer before the publish returns.
func (g *Gate) Hold(t *Ticket) {
	if t == nil || len(t.slots) == 0 {
		return
	}
	until := t.at.Add(g.cfg.MaxSlotHold)
	if !t.deadline.IsZero() {
		until = t.deadline.Add(g.cfg.SlotRenew)
	}
	g.slots.mu.Lock()
	g.slots.calls[t.callID] = &heldSlots{tool: t.tool, keys: t.slots, until: until}
	g.slots.mu.Unlock()
}

// Held reports whether this replica holds slots of call callID, and the
// call's tool: a result of the call frees them (Settle) only if it is
// believed as that tool's.
func (g *Gate) Held(callID string) (tool string, ok bool) {
	g.slots.mu.Lock()
	defer g.slots.mu.Unlock()
	h := g.slots.calls[callID]
	if h == nil {
		return "", false
	}
	return h.tool, true
}

// Unhold stops tracking the slots of a call that was not published
// (GiveBack gives them back).
func (g *Gate) Unhold(callID string) {
	g.slots.mu.Lock()
	delete(g.slots.calls, callID)
	g.slots.mu.Unlock()
}

// Settle releases the slots of a call whose result this replica saw. It
// does not block (it runs on the results consumer's goroutine): the
// release runs on its own, and Stop waits for it.
func (g *Gate) Settle(callID string) {
	g.slots.mu.Lock()
	h := g.slots.calls[callID]
	delete(g.slots.calls, callID)
	if h == nil || g.slots.closed {
		g.slots.mu.Unlock()
		return
	}
	g.slots.work.Add(1) // under mu: before close's Wait (it sets closed under mu first)
	g.slots.mu.Unlock()
	go func() {
		defer g.slots.work.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, k := range h.keys {
			if err := g.Store().Release(ctx, k, callID); err != nil {
				g.log.Warn("a concurrency slot was not released; its lease ends it", "call_id", callID, "limit", k.Limit, "err", err)
			}
		}
	}()
}

// close starts no release any more and waits for those under way.
func (s *slotHolder) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.work.Wait()
}

// renew renews the held slots' leases, and forgets those held past their
// bound (their leases end them).
func (g *Gate) renew(ctx context.Context) {
	now := time.Now()
	type renewal struct {
		callID string
		keys   []limits.Key
	}
	var todo []renewal
	g.slots.mu.Lock()
	for id, h := range g.slots.calls {
		if now.After(h.until) {
			delete(g.slots.calls, id)
			continue
		}
		todo = append(todo, renewal{id, h.keys})
	}
	g.slots.mu.Unlock()
	store := g.Store()
	for _, r := range todo {
		for _, k := range r.keys {
			if _, err := store.Renew(ctx, k, r.callID, g.cfg.SlotLease, now); err != nil && ctx.Err() == nil {
				g.log.Warn("a concurrency slot's lease was not renewed", "call_id", r.callID, "limit", k.Limit, "err", err)
			}
		}
	}
}
