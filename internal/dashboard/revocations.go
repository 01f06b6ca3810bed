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

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/identity"
)

// errRevocationUnknown: whether a session was signed out cannot be told
// now (NATS unreachable, or the sign-out record unreadable). Such a
// session is refused (fail closed).
var errRevocationUnknown = errors.New("dashboard: cannot tell whether this session was signed out (NATS unreachable)")

// revocationTimeout bounds a read or a write of one sign-out record.
const revocationTimeout = 5 * time.Second

// revocationSkew is added to a record's TTL (the session lifetime), so
// that a replica whose clock is behind the server's, or the server's
// own expiry, never drops a record while a session it ends may still be
// live on some replica.
const revocationSkew = 5 * time.Minute

// MaxSessionTTL is the longest Config.SessionTTL: a sign-out record lives
// SessionTTL + a clock-skew margin, within the bucket's age limit
// (bus.RevocationsMaxAge).
const MaxSessionTTL = bus.RevocationsMaxAge - revocationSkew

// revocations are the sign-outs every replica honours: the records of the
// revocations bucket (bus.Config.RevocationsBucket), one per API key,
// keyed by a keyed hash of the key (never the key in clear), each holding
// a "not before" time: a session of that key issued before it is ended.
// A sign-out overwrites its key's record (history 1) with a TTL of the
// session lifetime and revocationSkew, so the bucket is bounded by the
// number of keys, never by the number of sign-ins. Without API keys
// (identity.OpenAccess) every sign-in is the one open identity, whatever
// was typed, and shares one record.
//
// Nothing is watched or cached: each authenticated request reads its
// key's record from the bucket's leader (bus.KVGetFromLeader), so a
// sign-out on any replica holds on every replica from the moment it is
// written, and a replica that cannot read it refuses the session
// (errRevocationUnknown). Sign-outs made on this replica are also kept in
// memory (local), so that they hold here even when the write failed.
type revocations struct {
	kv   jetstream.KeyValue
	js   jetstream.JetStream
	nc   *nats.Conn
	mac  []byte        // derives a record's key from an API key
	ttl  time.Duration // a record's TTL: SessionTTL + revocationSkew
	open bool          // identity.OpenAccess: one record for every sign-in
	log  *slog.Logger

	mu sync.Mutex
	// local is record key → not-before (Unix ns) of the sign-outs made on
	// this replica, each kept for ttl: bounded by the number of keys.
	local map[string]int64
}

func newRevocations(cfg Config, mac []byte) (*revocations, error) {
	js, err := jetstream.New(cfg.Streams.Conn)
	if err != nil {
		return nil, fmt.Errorf("dashboard: jetstream: %w", err)
	}
	_, open := cfg.Auth.(identity.OpenAccess)
	return &revocations{kv: cfg.Streams.Revocations, js: js, nc: cfg.Streams.Conn, mac: mac, ttl: cfg.SessionTTL + revocationSkew,
		open: open, log: cfg.Logger.With("part", "sign-outs"), local: map[string]int64{}}, nil
}

// keyOf is the record key of an API key.
func (r *revocations) keyOf(apiKey string) string {
	m := hmac.New(sha256.New, r.mac)
	if r.open {
		m.Write([]byte("open access"))
	} else {
		m.Write([]byte("key:" + apiKey))
	}
	return "k." + hex.EncodeToString(m.Sum(nil))
}

// revoke ends every session of ss's key issued before now, on this
// replica at once and for every replica in the bucket. The not-before
// time is after ss's own issue time whatever the clocks say, so that the
// session signing out is always ended. An error means the record was not
// written: other replicas may still serve the key's sessions.
func (r *revocations) revoke(ctx context.Context, ss session) error {
	key := r.keyOf(ss.Key)
	nb := max(time.Now().UnixNano(), ss.Issued+1)
	r.remember(key, nb)
	if !r.nc.IsConnected() {
		return errors.New("NATS unreachable")
	}
	ctx, cancel := context.WithTimeout(ctx, revocationTimeout)
	defer cancel()
	if cur, err := r.notBefore(ctx, key); err == nil {
		nb = max(nb, cur) // a later sign-out by a replica whose clock is ahead stays
	}
	m := nats.NewMsg("$KV." + r.kv.Bucket() + "." + key)
	m.Data = []byte(strconv.FormatInt(nb, 10))
	if _, err := r.js.PublishMsg(ctx, m, jetstream.WithMsgTTL(r.ttl)); err != nil {
		return fmt.Errorf("dashboard: record the sign-out: %w", err)
	}
	return nil
}

// ended says whether ss was ended by a sign-out of its key (on any
// replica), or errRevocationUnknown when that cannot be told now.
func (r *revocations) ended(ctx context.Context, ss session) (bool, error) {
	key := r.keyOf(ss.Key)
	r.mu.Lock()
	local := r.local[key]
	r.mu.Unlock()
	switch {
	case ss.Issued < local:
		return true, nil
	case !r.nc.IsConnected():
		return false, errRevocationUnknown
	}
	ctx, cancel := context.WithTimeout(ctx, revocationTimeout)
	defer cancel()
	nb, err := r.notBefore(ctx, key)
	if err != nil {
		r.log.WarnContext(ctx, "dashboard: sign-out record unreadable: refusing the session", "err", err)
		return false, errRevocationUnknown
	}
	return ss.Issued < nb, nil
}

// notBefore is the not-before time (Unix ns) the record key holds, read
// from the bucket's leader; 0 without a record. A value that does not
// parse (only dispatchers write the bucket) counts from when it was
// written.
func (r *revocations) notBefore(ctx context.Context, key string) (int64, error) {
	e, err := bus.KVGetFromLeader(ctx, r.nc, r.kv.Bucket(), key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	}
	nb, err := strconv.ParseInt(string(e.Value), 10, 64)
	if err != nil {
		return e.Created.UnixNano(), nil
	}
	return nb, nil
}

// remember keeps a sign-out made on this replica for ttl, and forgets
// those whose sessions have all expired.
func (r *revocations) remember(key string, nb int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.local[key] = max(r.local[key], nb)
	horizon := time.Now().Add(-r.ttl).UnixNano()
	for k, v := range r.local {
		if v < horizon {
			delete(r.local, k)
		}
	}
}
