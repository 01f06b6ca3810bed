package dispatch

import (
	"errors"
	"fmt"
	"sync"

	"github.com/toolwire/toolwire/internal/identity"
)

// ErrTooManyWatches is returned by Watch when the caller (tenant and
// agent) already has Config.MaxWatchesPerCaller Watches open on this
// replica. The API answers resource_exhausted.
var ErrTooManyWatches = errors.New("dispatch: too many concurrent watches for this caller")

// ErrTooManyWaiting is returned by Call, and by GetResult with a wait,
// when the caller (tenant and agent) already has
// Config.MaxWaitingPerCaller requests waiting on this replica; nothing is
// admitted. The API answers resource_exhausted.
var ErrTooManyWaiting = errors.New("dispatch: too many waiting requests for this caller")

// capKind names what a caller holds.
type capKind uint8

const (
	capWatch capKind = iota
	capWaiting
)

type capKey struct {
	kind          capKind
	tenant, agent string
}

// callerCaps counts what each caller holds on this replica. An entry
// exists only while its count is positive, so the map is as large as the
// set of callers currently holding something.
type callerCaps struct {
	mu sync.Mutex
	n  map[capKey]int
}

// acquire takes one of at most limit slots of kind for id (limit < 0 = no
// cap); it fails with the kind's error. Every successful acquire is
// matched by one release.
func (c *callerCaps) acquire(kind capKind, id identity.Identity, limit int) error {
	k := capKey{kind: kind, tenant: id.Tenant, agent: id.Agent}
	c.mu.Lock()
	defer c.mu.Unlock()
	if limit >= 0 && c.n[k] >= limit {
		if kind == capWatch {
			return fmt.Errorf("%w (limit %d)", ErrTooManyWatches, limit)
		}
		return fmt.Errorf("%w (limit %d)", ErrTooManyWaiting, limit)
	}
	if c.n == nil {
		c.n = map[capKey]int{}
	}
	c.n[k]++
	return nil
}

func (c *callerCaps) release(kind capKind, id identity.Identity) {
	k := capKey{kind: kind, tenant: id.Tenant, agent: id.Agent}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[k] <= 1 {
		delete(c.n, k)
		return
	}
	c.n[k]--
}
