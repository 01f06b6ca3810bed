package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
)

// Tombstone is the value of a cancel key.
type Tombstone struct {
	// By names who cancelled: the caller's agent, an operator, ...
	By string `json:"by"`
	// Reason given with the cancel, if any.
	Reason string `json:"reason,omitempty"`
}

// CancelledError is the cause a call's context is cancelled with when its
// caller cancels it.
type CancelledError struct{ Tombstone }

func (e *CancelledError) Error() string {
	msg := "cancelled by " + e.By
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// cancels maps the cancel keys of running calls to their cancel functions.
// A call registers before it checks its tombstone, and the watcher cancels
// whatever is registered when a tombstone arrives, so no cancel is missed
// between the check and the start.
type cancels struct {
	mu  sync.Mutex
	fns map[string]context.CancelCauseFunc
}

func (c *cancels) register(key string, fn context.CancelCauseFunc) (unregister func()) {
	c.mu.Lock()
	if c.fns == nil {
		c.fns = map[string]context.CancelCauseFunc{}
	}
	c.fns[key] = fn
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.fns, key)
		c.mu.Unlock()
	}
}

func (c *cancels) cancel(key string, cause error) bool {
	c.mu.Lock()
	fn := c.fns[key]
	c.mu.Unlock()
	if fn != nil {
		fn(cause)
	}
	return fn != nil
}

// watchCancels holds one core subscription on the cancel bucket's subjects.
func (w *Worker) watchCancels() (*nats.Subscription, error) {
	prefix := "$KV." + w.bus.Config.CancelBucket() + "."
	sub, err := w.bus.NC.Subscribe(prefix+">", func(m *nats.Msg) {
		if op := m.Header.Get("KV-Operation"); op != "" {
			return // DEL or PURGE: nothing to cancel
		}
		key := strings.TrimPrefix(m.Subject, prefix)
		var ts Tombstone
		if err := json.Unmarshal(m.Data, &ts); err != nil {
			ts = Tombstone{By: "unknown"}
		}
		if w.cancels.cancel(key, &CancelledError{ts}) {
			w.log.Info("cancelling running call", "key", key, "by", ts.By)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("worker: subscribe cancels: %w", err)
	}
	return sub, nil
}

// tombstone returns the cancel record of a call, or nil.
func (w *Worker) tombstone(ctx context.Context, tenant, callID string) (*Tombstone, error) {
	e, err := w.bus.Cancels.Get(ctx, bus.CancelKey(tenant, callID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ts Tombstone
	if json.Unmarshal(e.Value(), &ts) != nil {
		ts = Tombstone{By: "unknown"}
	}
	return &ts, nil
}
