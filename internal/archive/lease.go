package archive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// leaderKey is the key of the archive bucket that names the active
// archiver.
const leaderKey = "leader"

// leaseValue is the leader key's value: who holds the lease and until
// when (the holder's clock).
type leaseValue struct {
	Holder string    `json:"holder"`
	Until  time.Time `json:"until"`
}

// lease is one replica's side of the archiver's election: a key of the
// archive bucket that a replica takes when it is free or expired and
// renews by compare-and-set on its revision (kv.Create, kv.Update), so
// that two replicas never both take it from the same revision. It is
// renewed by its own goroutine (renew), not between pieces of work, so a
// segment that takes long to read or upload keeps it.
type lease struct {
	kv   jetstream.KeyValue
	name string
	ttl  time.Duration

	mu    sync.Mutex
	rev   uint64
	until time.Time // this replica holds the lease until then (its clock, less a margin)
	term  uint64    // counts the times the lease was taken after not being held
	other string    // another holder last seen alive ("" = none)
}

// hold takes or renews the lease; it reports whether this replica holds
// it now.
func (l *lease) hold(ctx context.Context) (bool, error) {
	now := time.Now()
	b, _ := json.Marshal(leaseValue{Holder: l.name, Until: now.Add(l.ttl)})
	e, err := l.kv.Get(ctx, leaderKey)
	var rev uint64
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		rev, err = l.kv.Create(ctx, leaderKey, b)
	case err != nil:
	default:
		var cur leaseValue
		if json.Unmarshal(e.Value(), &cur) == nil && cur.Holder != l.name && now.Before(cur.Until) {
			l.lost()
			l.mu.Lock()
			l.other = cur.Holder
			l.mu.Unlock()
			return false, nil // another replica's, and alive
		}
		rev, err = l.kv.Update(ctx, leaderKey, b, e.Revision())
	}
	if err != nil {
		l.lost()
		if errors.Is(err, jetstream.ErrKeyExists) {
			return false, nil // another replica took it first
		}
		return false, fmt.Errorf("archive: lease: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !now.Before(l.until) {
		l.term++
	}
	// Count on it for three quarters of its time: a renewal that is late
	// stops this replica's work before another may take over.
	l.rev, l.until = rev, now.Add(l.ttl*3/4)
	return true, nil
}

func (l *lease) lost() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.until = time.Time{}
}

// held reports whether the lease is still this replica's.
func (l *lease) held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Now().Before(l.until)
}

// heldTerm reports whether the lease is held and, if so, the term: a
// term other than the last one seen means another replica may have led
// meanwhile.
func (l *lease) heldTerm() (bool, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Now().Before(l.until), l.term
}

// otherHolder is another replica seen holding the lease ("" = none yet).
func (l *lease) otherHolder() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.other
}

// renew takes or renews the lease every interval until ctx ends, logging
// a failure with log.
func (l *lease) renew(ctx context.Context, interval time.Duration, warn func(ctx context.Context, err error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := l.hold(ctx); err != nil && ctx.Err() == nil {
			warn(ctx, err)
		}
	}
}

// release gives the lease up, so that another replica takes over at once
// (used when stopping). Best effort: an expired lease is taken anyway.
func (l *lease) release(ctx context.Context) {
	l.mu.Lock()
	rev, held := l.rev, time.Now().Before(l.until)
	l.until, l.rev = time.Time{}, 0
	l.mu.Unlock()
	if rev != 0 && held {
		_ = l.kv.Delete(ctx, leaderKey, jetstream.LastRevision(rev))
	}
}
