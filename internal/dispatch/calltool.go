package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// callTools remembers the tool of calls this replica looked up (callTool),
// by tenant and call id (toolKey): what decides whose signature a call's
// result or event needs; and their deadlines, by call id (callEnd).
// Bounded: cleared when full.
type callTools struct {
	mu     sync.Mutex
	tools  map[string]string
	ends   map[string]time.Time // by call id: the call's deadline, when it has one
	misses map[string]time.Time // calls not found, until when that is believed
	// routes are the dispatchers that admitted the calls known stored in
	// the calls stream (ToolCall.dispatcher: the token of their result
	// subjects), by toolKey. Cleared with tools.
	routes map[string]string
	// budgets are the latency budgets the calls were admitted with
	// (ToolCall.latency_budget), by call id: what a read of a result is
	// measured against (withBudget). Cleared with tools.
	budgets map[string]watchedCall
}

const (
	maxCallTools = 1 << 16
	// callToolMiss is how long a call not found stays not found: a call
	// stored late (unconfirmed) is found at the next look after it.
	callToolMiss = 5 * time.Second
)

// get returns the tool remembered for callID; known is false when
// nothing is remembered (look it up).
func (c *callTools) get(callID string) (tool string, known bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.tools[callID]; ok {
		return t, true
	}
	until, ok := c.misses[callID]
	return "", ok && time.Now().Before(until)
}

// miss remembers that callID was not found, for callToolMiss.
func (c *callTools) miss(callID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.misses == nil || len(c.misses) >= maxCallTools {
		c.misses = map[string]time.Time{}
	}
	c.misses[callID] = time.Now().Add(callToolMiss)
}

func (c *callTools) put(key, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tools == nil || len(c.tools) >= maxCallTools {
		c.tools, c.ends = map[string]string{}, map[string]time.Time{}
		c.budgets, c.routes = nil, nil
	}
	c.tools[key] = value
}

// putCall remembers call's tool under key (toolKey), its deadline, if
// any, under its id (end), and the latency budget it was admitted with
// (budget).
func (c *callTools) putCall(key string, call *toolwirev1.ToolCall) {
	c.put(key, call.GetTool())
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := call.GetDeadline(); d != nil {
		c.ends[call.GetCallId()] = d.AsTime()
	}
	if b, ok := admittedBudget(call); ok {
		if c.budgets == nil {
			c.budgets = map[string]watchedCall{}
		}
		c.budgets[call.GetCallId()] = b
	}
}

// budget returns the latency budget call callID was admitted with, as
// remembered; false when none is.
func (c *callTools) budget(callID string) (watchedCall, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.budgets[callID]
	return b, ok
}

// stored remembers that the call under key (toolKey), remembered with
// putCall, is stored in the calls stream, admitted by dispatcher (the
// name its result's subject carries).
func (c *callTools) stored(key, dispatcher string) {
	if dispatcher == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.tools[key]; !ok {
		return // cleared since putCall: remembered with it or not at all
	}
	if c.routes == nil {
		c.routes = map[string]string{}
	}
	c.routes[key] = dispatcher
}

// route is the dispatcher that admitted the call under key (toolKey),
// remembered once the call was known stored in the calls stream (stored);
// "" when it is not.
func (c *callTools) route(key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.routes[key]
}

// end is the deadline remembered for callID; zero when none is.
func (c *callTools) end(callID string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ends[callID]
}

// callTool returns the tool of call callID of tenant as a dispatcher
// admitted it — from its waiter, this replica's memory (calls it
// submitted, calls looked up), or the stored call (storedCall: only
// dispatchers write calls; a scan of the calls stream around the time in
// the call's id, so a replica looks a call up once) — never from a
// result or an event, which a worker credential can write. "" when the
// call is not found (remembered for callToolMiss): then only what a
// dispatcher signed is believed for it. An error says it could not be
// looked up.
func (d *Dispatcher) callTool(ctx context.Context, tenant, callID string) (string, error) {
	d.mu.Lock()
	w := d.waiters[callID]
	d.mu.Unlock()
	if w != nil && w.tenant == tenant {
		return w.tool, nil
	}
	key := toolKey(tenant, callID)
	if t, ok := d.tools.get(key); ok {
		return t, nil
	}
	call, fromStream, err := d.storedCallFrom(ctx, tenant, "", callID)
	if errors.Is(err, ErrCallNotStored) {
		d.tools.miss(key)
		return "", nil
	}
	if err != nil {
		// Not "not found": the caller is told to try again, never that a
		// finished call is pending.
		return "", fmt.Errorf("dispatch: look up call %s: %w", callID, err)
	}
	d.tools.putCall(key, call)
	if fromStream {
		d.tools.stored(key, call.GetDispatcher())
	}
	return call.GetTool(), nil
}

// toolKey is callTools' key of call callID of tenant: a call is known to
// its own tenant only (another tenant's id reads as a made-up one).
func toolKey(tenant, callID string) string { return tenant + "\x00" + callID }

// lastEvent returns the newest believed event of call callID of tenant
// (a call of tool: believed.CheckEvent), nil when it has none. The last
// stored event is read first (one read: what it was before events were
// signed); only when it is not believed are the call's events read, at
// most believed.MaxScan of them, and the newest believed one taken.
// Events not believed are counted and logged.
func (d *Dispatcher) lastEvent(ctx context.Context, tenant, callID, tool string) (*toolwirev1.CallEvent, error) {
	return d.newestEvent(ctx, eventQuery{tenant: tenant, callID: callID, tool: tool})
}

// eventQuery is what newestEvent looks for: the newest believed event of
// call callID of tenant (of tool; empty = any) that keep takes (nil =
// any).
type eventQuery struct {
	tenant, callID, tool string
	keep                 func(toolwirev1.CallEventType) bool
}

// newestEvent is lastEvent of the events q keeps.
func (d *Dispatcher) newestEvent(ctx context.Context, q eventQuery) (*toolwirev1.CallEvent, error) {
	ev, _, err := d.newestEventAt(ctx, q)
	return ev, err
}

// newestEventAt is newestEvent, and the subject the event is stored on.
func (d *Dispatcher) newestEventAt(ctx context.Context, q eventQuery) (*toolwirev1.CallEvent, string, error) {
	kept := func(ev *toolwirev1.CallEvent) bool { return ev != nil && (q.keep == nil || q.keep(ev.GetType())) }
	subject := d.subj.EventsAnyDispatcher(q.tenant, q.callID)
	m, err := bus.LastMsgFromLeader(ctx, d.bus.JS, d.bus.Events, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	if ev, err := d.checkEvent(ctx, q.callID, q.tool, m); kept(ev) || err != nil {
		return ev, m.Subject, err
	}
	var last *toolwirev1.CallEvent
	var at string
	var lookupErr error
	_, err = bus.EachMsgFromLeader(ctx, d.bus.JS, d.bus.Events, subject, believed.MaxScan, func(m *jetstream.RawStreamMsg) bool {
		ev, err := d.checkEvent(ctx, q.callID, q.tool, m)
		if kept(ev) {
			last, at = ev, m.Subject
		}
		lookupErr = err
		return err == nil
	})
	return last, at, errors.Join(err, lookupErr)
}

// checkEvent is believed.CheckEvent of a stored event: nil when it is not
// believed (counted and logged), an error when it could not be checked.
func (d *Dispatcher) checkEvent(ctx context.Context, callID, tool string, m *jetstream.RawStreamMsg) (*toolwirev1.CallEvent, error) {
	ev, _, err := believed.CheckEvent(ctx, d.bus.Keys, callID, tool, m.Header, m.Data)
	if se := signing.AsError(err); se != nil {
		d.refusedResult(believed.Refused{Subject: m.Subject, Sequence: m.Sequence, Err: se})
		return nil, nil
	}
	return ev, err
}
