package approvals

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// GrantIndex is every replica's in-memory copy of the grants, kept
// current by a KV watch of the bucket's grant keys, so that a grant made
// or revoked on one replica is in force on every replica as soon as its
// watch delivers the write (milliseconds; it is one stream message). It is
// the policy.GrantSource admission decides with: Grants returns the
// grants of the caller's tenant, which Decide then checks one by one.
type GrantIndex struct {
	s   *Store
	log *slog.Logger

	mu       sync.RWMutex
	byTenant map[string][]policy.Grant // replaced, never changed in place
	grants   map[string]*Grant         // by key

	watcher jetstream.KeyWatcher
	// cancel ends the watch's context: nats.go ends a watch's
	// subscription goroutine only with it once the connection is closed
	// (the watcher's Stop cannot reach the server then).
	cancel context.CancelFunc
	done   chan struct{}
}

var _ policy.GrantSource = (*GrantIndex)(nil)

// NewGrantIndex returns an index over s's bucket; Start starts it.
func NewGrantIndex(s *Store, log *slog.Logger) *GrantIndex {
	return &GrantIndex{s: s, log: log, byTenant: map[string][]policy.Grant{}, grants: map[string]*Grant{}}
}

// Start watches the grants and returns once the grants stored now are
// loaded (or ctx ends: then the watch is stopped and ctx's error
// returned).
func (x *GrantIndex) Start(ctx context.Context) error {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w, err := x.s.kv.Watch(wctx, grantPrefix+">")
	if err != nil {
		cancel()
		return fmt.Errorf("approvals: watch grants: %w", err)
	}
	x.watcher, x.cancel, x.done = w, cancel, make(chan struct{})
	loaded := make(chan struct{})
	go x.follow(wctx, w, loaded)
	select {
	case <-loaded:
		return nil
	case <-ctx.Done():
		_ = x.Stop(context.WithoutCancel(ctx))
		return fmt.Errorf("approvals: load grants: %w", ctx.Err())
	}
}

// Stop ends the watch and waits for its goroutine, or until ctx ends
// (startstop.Service). It ends the watch also when the connection is
// already closed (a killed dispatcher's): the watch's context is
// cancelled, which ends nats.go's goroutine of the subscription and the
// index's. Idempotent; safe before Start.
func (x *GrantIndex) Stop(ctx context.Context) error {
	if x.watcher == nil {
		return nil
	}
	if err := x.watcher.Stop(); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		x.log.Debug("grant watch stop", "err", err)
	}
	x.cancel()
	select {
	case <-x.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// follow applies the watch's updates until the watch ends (its updates
// channel closed) or ctx does (Stop). Ended by ctx, it takes what the
// channel holds, so that a delivery of nats.go blocked on a full channel
// returns and its goroutine ends.
func (x *GrantIndex) follow(ctx context.Context, w jetstream.KeyWatcher, loaded chan<- struct{}) {
	defer close(x.done)
	defer func() {
		if loaded != nil {
			close(loaded) // the watch ended before the initial values: Start returns
		}
	}()
	for {
		select {
		case <-ctx.Done():
			bus.DrainWatch(w)
			return
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return
			case e != nil:
				x.apply(e)
			case loaded != nil:
				close(loaded)
				loaded = nil
			}
		}
	}
}

func (x *GrantIndex) apply(e jetstream.KeyValueEntry) {
	tenant, _, ok := parseKey(e.Key(), grantPrefix)
	if !ok {
		return
	}
	if e.Operation() != jetstream.KeyValuePut {
		x.remove(tenant, e.Key())
		return
	}
	g, err := decodeGrant(e.Value())
	if err != nil || g.Tenant != tenant || g.Validate() != nil {
		x.log.Warn("ignoring an undecodable or invalid grant", "key", e.Key(), "err", err)
		x.remove(tenant, e.Key())
		return
	}
	x.Add(g)
}

// Add puts g in the index at once (the replica that stores a grant adds
// it before its watch delivers it).
func (x *GrantIndex) Add(g *Grant) {
	key := GrantKey(g.Tenant, g.ID)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.grants[key] = g
	x.rebuild(g.Tenant)
}

func (x *GrantIndex) remove(tenant, key string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.grants[key]; ok {
		delete(x.grants, key)
		x.rebuild(tenant)
	}
}

// rebuild makes tenant's list anew (x.mu held).
func (x *GrantIndex) rebuild(tenant string) {
	var list []policy.Grant
	prefix := grantPrefix + tenant + "."
	for k, g := range x.grants {
		if strings.HasPrefix(k, prefix) {
			list = append(list, g.Grant)
		}
	}
	if len(list) == 0 {
		delete(x.byTenant, tenant)
		return
	}
	x.byTenant[tenant] = list
}

// Grants returns the grants of the caller's tenant (policy.GrantSource):
// Decide checks each against the call. The slice is shared: read only.
func (x *GrantIndex) Grants(caller *toolwirev1.Caller, _ string) []policy.Grant {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.byTenant[caller.GetTenant()]
}

// List returns tenant's grants, newest first, narrowed to one agent's and
// one session's when agent or session is set.
func (x *GrantIndex) List(tenant, agent, session string) []*Grant {
	x.mu.RLock()
	prefix := grantPrefix + tenant + "."
	var out []*Grant
	for k, g := range x.grants {
		if strings.HasPrefix(k, prefix) && (agent == "" || g.Agent == agent) && (session == "" || g.Session == session) {
			out = append(out, g)
		}
	}
	x.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Grant) int { return strings.Compare(b.ID, a.ID) })
	return out
}

// Remove drops grant id of tenant at once (the replica that revokes a
// grant removes it before its watch delivers the removal).
func (x *GrantIndex) Remove(tenant, id string) { x.remove(tenant, GrantKey(tenant, id)) }
