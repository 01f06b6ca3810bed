package poolview

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/toolwire/toolwire/internal/bus"
)

// loadSnap is one refresh's view; replaced whole, never modified.
type loadSnap struct {
	pools  []poolRoute
	routes *routeCache // shared by snapshots with the same pools and filters
	stores []storeUse
	// full is a store every call may write that is past the high-water
	// mark; keyedFull one that calls with an idempotency key write.
	full, keyedFull *storeUse
}

// storeUse is one store's use at the last read.
type storeUse struct {
	bus.Store
	bytes int64
	// account marks the JetStream account's own limit, not a store.
	account bool
}

// poolRoute is a pool and its consumer's filters at one refresh.
type poolRoute struct {
	*poolLoad
	filters []string
}

// routeCache maps call subjects to their pool (nil: none); it stops
// growing at maxRoutes (subjects carry the tenant).
type routeCache struct {
	m sync.Map
	n atomic.Int64
}

const maxRoutes = 100000

// publish makes the current figures the snapshot admission reads.
func (l *Load) publish() {
	s := &loadSnap{stores: l.stores}
	for name, p := range l.pools {
		s.pools = append(s.pools, poolRoute{p, l.filters[name]})
	}
	slices.SortFunc(s.pools, func(a, b poolRoute) int { return strings.Compare(a.consumer, b.consumer) })
	s.routes = &routeCache{}
	if old := l.snap.Load(); old != nil && slices.EqualFunc(old.pools, s.pools, func(x, y poolRoute) bool {
		return x.poolLoad == y.poolLoad && slices.Equal(x.filters, y.filters)
	}) {
		s.routes = old.routes
	}
	hw := l.cfg.StoreHighWater
	for i := range s.stores {
		u := &s.stores[i]
		// Only a store that refuses writes when full (discard new: calls,
		// idempotency keys) refuses admission as it fills. A discard-old
		// store (results, events, retries) drops its oldest messages and
		// never blocks a write; refusing calls until its oldest messages
		// aged out would refuse every call for days (events are kept 72 h).
		if !u.DiscardNew || u.MaxBytes <= 0 || float64(u.bytes) < hw*float64(u.MaxBytes) {
			continue
		}
		switch {
		case u.Use == bus.UsedByEveryCall && s.full == nil:
			s.full = u
		case u.Use == bus.UsedByKeyedCalls && s.keyedFull == nil:
			s.keyedFull = u
		}
	}
	l.snap.Store(s)
}

// route returns the pool whose consumer filters subject, or nil.
func (s *loadSnap) route(subject string) *poolLoad {
	if p, ok := s.routes.m.Load(subject); ok {
		return p.(*poolLoad)
	}
	var found *poolLoad
	for _, p := range s.pools {
		if slices.ContainsFunc(p.filters, func(f string) bool { return bus.SubjectMatches(f, subject) }) {
			found = p.poolLoad
			break
		}
	}
	if s.routes.n.Add(1) <= maxRoutes {
		s.routes.m.Store(subject, found)
	}
	return found
}
