package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// errRevocationUnknown: whether a session was signed out cannot be told
// now (NATS unreachable, or the bucket unreadable before the watch caught
// up). Such a session is refused (fail closed).
var errRevocationUnknown = errors.New("dashboard: cannot tell whether this session was signed out (NATS unreachable)")

// revocationReadTimeout bounds a direct read of one sign-out record.
const revocationReadTimeout = 5 * time.Second

// revocationRewatchPause is the pause before a failed watch of the
// sign-out bucket is started again on a connection that is up.
const revocationRewatchPause = time.Second

// revocations is the set of signed-out sessions every replica refuses:
// the records of the revocations bucket (bus.Config.RevocationsBucket),
// one per sign-out, keyed by a keyed hash of the session's nonce (never
// the key, never the cookie), each with a TTL that ends when the session's
// cookie does. Each replica keeps them in memory, fed by a watch (run);
// until that watch has delivered every record present when it started,
// and whenever the connection is down, a session it does not already
// know as signed out is checked by a direct read (revoked).
type revocations struct {
	kv  jetstream.KeyValue
	nc  *nats.Conn
	mac []byte // derives the record's key from a nonce
	ttl time.Duration
	log *slog.Logger

	mu    sync.Mutex
	ready bool             // the watch has caught up, and the connection has not dropped since
	set   map[string]int64 // record key → the cookie's expiry (Unix seconds)
	swept time.Time
}

func newRevocations(cfg Config, mac []byte) *revocations {
	return &revocations{kv: cfg.Streams.Revocations, nc: cfg.Streams.Conn, mac: mac, ttl: cfg.SessionTTL,
		log: cfg.Logger.With("part", "sign-outs"), set: map[string]int64{}}
}

// keyOf is the record key of a session's nonce.
func (r *revocations) keyOf(nonce string) string {
	m := hmac.New(sha256.New, r.mac)
	m.Write([]byte(nonce))
	return "s." + hex.EncodeToString(m.Sum(nil))
}

// revoke records that the session ss is signed out, on this replica at
// once and for every replica in the bucket (kept until ss expires). An
// error means the record was not written: other replicas may still serve
// a copy of the cookie.
func (r *revocations) revoke(ctx context.Context, ss session) error {
	key := r.keyOf(ss.Nonce)
	r.add(key, ss.Expires)
	if !r.nc.IsConnected() {
		return errors.New("NATS unreachable")
	}
	ttl := time.Until(time.Unix(ss.Expires, 0)).Truncate(time.Second) + time.Second // KeyTTL counts whole seconds
	ctx, cancel := context.WithTimeout(ctx, revocationReadTimeout)
	defer cancel()
	_, err := r.kv.Create(ctx, key, []byte(strconv.FormatInt(ss.Expires, 10)), jetstream.KeyTTL(ttl))
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("dashboard: record the sign-out: %w", err)
	}
	return nil
}

// revoked says whether the session with nonce was signed out, or
// errRevocationUnknown when that cannot be told now.
func (r *revocations) revoked(ctx context.Context, nonce string) (bool, error) {
	key := r.keyOf(nonce)
	r.mu.Lock()
	_, hit := r.set[key]
	ready := r.ready
	r.mu.Unlock()
	switch {
	case hit:
		return true, nil
	case !r.nc.IsConnected():
		return false, errRevocationUnknown
	case ready:
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, revocationReadTimeout)
	defer cancel()
	e, err := r.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	case err != nil:
		r.log.WarnContext(ctx, "dashboard: sign-out record unreadable: refusing the session", "err", err)
		return false, errRevocationUnknown
	}
	r.add(key, r.expiryOf(e))
	return true, nil
}

// add keeps key until exp (Unix seconds), and forgets the records whose
// sessions have expired (at most once a minute).
func (r *revocations) add(key string, exp int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.set[key] = max(r.set[key], exp)
	now := time.Now()
	if now.Sub(r.swept) < time.Minute {
		return
	}
	r.swept = now
	for k, e := range r.set {
		if e < now.Unix() {
			delete(r.set, k)
		}
	}
}

// expiryOf is the session expiry a record holds; one that does not parse
// (only dispatchers write the bucket) is kept for a whole SessionTTL from
// when it was written.
func (r *revocations) expiryOf(e jetstream.KeyValueEntry) int64 {
	exp, err := strconv.ParseInt(string(e.Value()), 10, 64)
	if err != nil {
		return e.Created().Add(r.ttl).Unix()
	}
	return exp
}

func (r *revocations) setReady(ready bool) {
	r.mu.Lock()
	r.ready = ready
	r.mu.Unlock()
}

// run follows the bucket until ctx ends: a watch from the start of the
// bucket, stopped when the connection drops and started again (from the
// start: what was signed out meanwhile is read again) once it is back.
func (r *revocations) run(ctx context.Context) {
	status := r.nc.StatusChanged(nats.CONNECTED, nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	defer r.nc.RemoveStatusListener(status)
	for ctx.Err() == nil {
		if r.nc.IsConnected() {
			if err := r.follow(ctx, &status); err != nil {
				r.log.WarnContext(ctx, "dashboard: sign-out watch ended; sessions are read from the bucket until it is back", "err", err)
			}
		}
		pause := time.NewTimer(revocationRewatchPause)
		select {
		case <-ctx.Done():
		case _, ok := <-status:
			if !ok {
				status = nil // closed for good: only ctx ends the loop now
			}
		case <-pause.C:
		}
		pause.Stop()
	}
}

// follow watches the bucket into the set until ctx ends (nil), or the
// watch or the connection fails. *status becomes nil once the connection
// is closed for good.
func (r *revocations) follow(ctx context.Context, status *chan nats.Status) error {
	r.setReady(false)
	defer r.setReady(false)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := r.kv.WatchAll(wctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case st, ok := <-*status:
			// Any change (a drop, or a reconnect whose drop went unseen)
			// starts the watch again once the connection is up.
			if !ok {
				*status = nil
			}
			return fmt.Errorf("connection %s", st)
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return errors.New("watch closed")
			case e == nil:
				r.setReady(true) // every record present at the start is in the set
			default:
				r.add(e.Key(), r.expiryOf(e))
			}
		}
	}
}
