package signing

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// EventsReader hands each the events stored for the call whose result
// subject is resultSubject, on each of the call's events subjects (one
// per dispatcher that wrote some) oldest first, until each returns false
// (the reader goes on with the next subject) or limit were read
// (bus.EventsReader). It reports whether it read them all: false when it
// stopped at limit. A keyring with one makes a result's claim check
// (internal/believed): whose STARTED holds the result's attempt.
type EventsReader func(ctx context.Context, resultSubject string, limit int, each func(*jetstream.RawStreamMsg) bool) (complete bool, err error)

// EventsWith gives k the events of calls, for the claim check. Call it
// before k is used.
func (k *Keyring) EventsWith(r EventsReader) { k.events = r }

// Events is k's events reader; nil when it has none (then no claim is
// checked).
func (k *Keyring) Events() EventsReader { return k.events }

// ListPoolKeys makes k list the keys enrolled for a pool (SoleKey): a
// pool with one key needs no claim check, which costs a read of the
// call's events per result. Only a credential that may list the
// registry bucket's keys (a dispatcher's) should; without it every
// result of a pool key is checked against its claim.
func (k *Keyring) ListPoolKeys() { k.listPools.Store(true) }

// ListsPoolKeys reports whether k lists the keys enrolled for a pool
// (ListPoolKeys).
func (k *Keyring) ListsPoolKeys() bool { return k.listPools.Load() }

// poolKeys is a pool's enrolled keys as last listed, until when they are
// believed (a listing that failed: none, and not retried until then).
type poolKeys struct {
	keys  []string
	until time.Time
}

// SoleKey reports whether signer is the only key enrolled for pool as
// the registry listed it at most sourceTTL ago (ListPoolKeys). A key
// enrolled since then is not among them: its results are checked, and a
// result of the pool's other key is checked once the listing is renewed.
// False when k does not list, or the listing failed.
func (k *Keyring) SoleKey(ctx context.Context, pool, signer string) bool {
	if !k.listPools.Load() {
		return false
	}
	now := time.Now()
	k.mu.Lock()
	p, ok := k.pools[pool]
	k.mu.Unlock()
	if !ok || !now.Before(p.until) {
		// One listing per pool at a time, bounded on its own (not by the
		// first caller's context, which the others share it with): each
		// caller waits for it as long as its own context lets it, and
		// takes the pool as having other keys when it cannot.
		ch := k.listing.DoChan(pool, func() (any, error) {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), listTimeout)
			defer cancel()
			keys, err := k.listPool(ctx, pool)
			p := poolKeys{keys: keys, until: time.Now().Add(sourceTTL)}
			if err != nil {
				p = poolKeys{until: time.Now().Add(missTTL)}
			}
			k.mu.Lock()
			if len(k.pools) >= maxEntries {
				clear(k.pools)
			}
			k.pools[pool] = p
			k.mu.Unlock()
			return p, nil
		})
		select {
		case r := <-ch:
			p = r.Val.(poolKeys)
		case <-ctx.Done():
			return false
		}
	}
	return len(p.keys) == 1 && p.keys[0] == signer
}

// Claim is an attempt's claim as a claim check found it: the signer of
// the first believed STARTED of the attempt, and where and when it was
// stored.
type Claim struct {
	Signer string
	Seq    uint64
	Time   time.Time
}

type claimKey struct {
	call    string
	attempt int32
}

// Claimed is the claim of attempt of call that a check found
// (RememberClaim; call names the call within its tenant). A claim once
// stored never changes (a STARTED stored later comes after it), so a
// result stored after it needs no read; one stored before it, or an
// attempt with no claim found, does.
func (k *Keyring) Claimed(call string, attempt int32) (Claim, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c, ok := k.claims[claimKey{call, attempt}]
	return c, ok
}

// RememberClaim keeps c, the claim of attempt of call a check found, for
// Claimed (at most maxEntries, then forgotten all at once).
func (k *Keyring) RememberClaim(call string, attempt int32, c Claim) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.claims) >= maxEntries {
		clear(k.claims)
	}
	k.claims[claimKey{call, attempt}] = c
}

// listTimeout bounds one listing of a pool's keys.
const listTimeout = 5 * time.Second

// listPool lists the public keys enrolled for pool.
func (k *Keyring) listPool(ctx context.Context, pool string) ([]string, error) {
	if strings.ContainsAny(pool, ".*> ") || pool == "" {
		return nil, fmt.Errorf("signing: pool %q is not a subject token", limit(pool))
	}
	l, err := k.kv.ListKeysFiltered(ctx, Prefix+"*.pool."+pool)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("signing: keys of pool %q: %w", pool, err)
	}
	defer func() { _ = l.Stop() }()
	var keys []string
	for key := range l.Keys() {
		pub, _, _ := strings.Cut(strings.TrimPrefix(key, Prefix), ".")
		if !slices.Contains(keys, pub) {
			keys = append(keys, pub)
		}
	}
	if err := ctx.Err(); err != nil { // the listing stopped short: its keys may be a part
		return nil, fmt.Errorf("signing: keys of pool %q: %w", pool, err)
	}
	return keys, nil
}
