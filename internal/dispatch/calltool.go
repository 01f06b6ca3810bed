package dispatch

import (
	"context"
	"errors"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// callTools remembers the tool of calls this replica looked up (callTool):
// what decides whose signature a call's result or event needs. Bounded:
// cleared when full.
type callTools struct {
	mu    sync.Mutex
	tools map[string]string
}

const maxCallTools = 1 << 14

func (c *callTools) get(callID string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tools[callID]
	return t, ok
}

func (c *callTools) put(callID, tool string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tools == nil || len(c.tools) >= maxCallTools {
		c.tools = map[string]string{}
	}
	c.tools[callID] = tool
}

// callTool returns the tool of call callID of tenant as a dispatcher
// admitted it — from its waiter, this replica's memory, or the stored
// call (storedCall: only dispatchers write calls) — never from a result
// or an event, which a worker credential can write. "" when the call is
// not found: then only what a dispatcher signed is believed for it.
func (d *Dispatcher) callTool(ctx context.Context, tenant, callID string) string {
	d.mu.Lock()
	w := d.waiters[callID]
	d.mu.Unlock()
	if w != nil {
		return w.tool
	}
	if t, ok := d.tools.get(callID); ok {
		return t
	}
	call, err := d.storedCall(ctx, tenant, "", callID)
	if err != nil {
		if !errors.Is(err, ErrCallNotStored) {
			d.log.WarnContext(ctx, "call not looked up; only dispatchers' records of it are believed", "call_id", callID, "err", err)
		}
		return ""
	}
	d.tools.put(callID, call.GetTool())
	return call.GetTool()
}

// lastEvent returns the newest believed event of call callID of tenant
// (a call of tool: believed.CheckEvent), nil when it has none. Events not
// believed are counted and logged, and skipped.
func (d *Dispatcher) lastEvent(ctx context.Context, tenant, callID, tool string) (*toolwirev1.CallEvent, error) {
	msgs, err := bus.AllMsgsFromLeader(ctx, d.bus.JS, d.bus.Events, d.subj.EventsAnyDispatcher(tenant, callID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		ev, _, err := believed.CheckEvent(ctx, d.bus.Keys, callID, tool, msgs[i].Header, msgs[i].Data)
		if se := signing.AsError(err); se != nil {
			d.refusedResult(believed.Refused{Subject: msgs[i].Subject, Sequence: msgs[i].Sequence, Err: se})
			continue
		}
		if err != nil {
			return nil, err
		}
		return ev, nil
	}
	return nil, nil
}
