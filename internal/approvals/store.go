package approvals

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/policy"
)

// Errors of the store.
var (
	// ErrNotFound: no such record or grant (never stored, expired by its
	// TTL, or revoked).
	ErrNotFound = errors.New("approvals: not found")
	// ErrConflict: the record changed since it was read (another replica
	// decided it first), or a record with its key exists already.
	ErrConflict = errors.New("approvals: changed concurrently")
	// ErrNonceUsed: the nonce was consumed by another call.
	ErrNonceUsed = errors.New("approvals: approval already used")
	// ErrCorrupt: a stored value does not decode.
	ErrCorrupt = errors.New("approvals: undecodable record")
)

// Store reads and writes the approvals bucket (bus.Bus.Approvals). It is
// safe for concurrent use. The dispatcher writes; workers only read
// (their NATS permissions allow gets of the bucket, nothing else). Every
// read goes to the bucket's leader (leaderReader).
type Store struct {
	kv      jetstream.KeyValue
	read    reader
	js      jetstream.JetStream
	stream  string // the bucket's stream
	subject string // the bucket's key prefix, "$KV.<bucket>."
	retain  time.Duration
}

// NewStore returns the store over b's approvals bucket. Decided records
// and used nonces are kept retain after their decision (the audit
// horizon; per-key TTL), then vanish; zero = b.Config.CallsMaxAge.
func NewStore(b *bus.Bus, retain time.Duration) *Store {
	if retain <= 0 {
		retain = b.Config.CallsMaxAge
	}
	bucket := b.Config.ApprovalsBucket()
	return &Store{kv: b.Approvals, read: leaderReader(b), js: b.JS, stream: "KV_" + bucket, subject: "$KV." + bucket + ".", retain: retain}
}

// Retain is how long decided records are kept.
func (s *Store) Retain() time.Duration { return s.retain }

// NewNonce returns a fresh nonce: 128 random bits in hex.
func NewNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// write stores data at key if the key's last revision is rev (0 = the key
// has no value yet), with a TTL (0 = none) and headers; it returns the new
// revision. A revision that does not hold is ErrConflict.
func (s *Store) write(ctx context.Context, key string, rev uint64, data []byte, ttl time.Duration, hdr nats.Header) (uint64, error) {
	if hdr == nil {
		hdr = nats.Header{}
	}
	hdr.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(rev, 10))
	if ttl > 0 {
		// Whole seconds, at least one: the server's unit and minimum.
		hdr.Set(jetstream.MsgTTLHeader, strconv.FormatInt(int64(max(time.Second, ttl.Round(time.Second))/time.Second), 10)+"s")
	}
	ack, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: s.subject + key, Data: data, Header: hdr})
	if bus.IsWrongLastSequence(err) {
		return 0, fmt.Errorf("%w: %s", ErrConflict, key)
	}
	if err != nil {
		return 0, fmt.Errorf("approvals: write %s: %w", key, err)
	}
	return ack.Sequence, nil
}

// recordTTL is how long a record is kept from now: a pending one until its
// expiry and then the retention (the sweep expires it before), a decided
// one the retention.
func (s *Store) recordTTL(r *Record, now time.Time) time.Duration {
	if r.Decided() {
		return s.retain
	}
	return max(r.Approval.GetExpiresAt().AsTime().Sub(now), 0) + s.retain
}

// Park stores a new pending record (r.Revision 0); ErrConflict when its
// key is taken. It sets r.Revision.
func (s *Store) Park(ctx context.Context, r *Record) error {
	if r.Revision != 0 || r.Decided() {
		return errors.New("approvals: Park takes a new pending record")
	}
	return s.put(ctx, r)
}

// Update stores r over the revision it was read at (compare-and-set): the
// one write among replicas racing to decide or finish a record that wins.
// ErrConflict when the record changed since; r.Revision is then stale
// (read it again). On success r.Revision is the new revision.
func (s *Store) Update(ctx context.Context, r *Record) error {
	if r.Revision == 0 {
		return errors.New("approvals: Update takes a stored record")
	}
	return s.put(ctx, r)
}

func (s *Store) put(ctx context.Context, r *Record) error {
	if !ValidID(r.ID()) || !bus.ValidTenant(r.Tenant()) || r.Call.GetCallId() != r.ID() {
		return fmt.Errorf("approvals: record %q of tenant %q: bad id or tenant", r.ID(), r.Tenant())
	}
	data, err := r.encode()
	if err != nil {
		return err
	}
	hdr := nats.Header{}
	r.headers(hdr)
	rev, err := s.write(ctx, CallKey(r.Tenant(), r.ID()), r.Revision, data, s.recordTTL(r, time.Now()), hdr)
	if err != nil {
		return err
	}
	r.Revision = rev
	return nil
}

// Get reads the record of call id in tenant; ErrNotFound when there is
// none.
func (s *Store) Get(ctx context.Context, tenant, id string) (*Record, error) {
	if !ValidID(id) || !bus.ValidTenant(tenant) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return getRecord(ctx, s.read, tenant, id)
}

// reader reads key of the approvals bucket from its stream's leader:
// ErrNotFound when it has no value.
type reader func(ctx context.Context, key string) (*bus.KVEntry, error)

// leaderReader reads b's approvals bucket from its leader. A direct get
// (kv.Get) may be answered by a replica that has not yet stored the
// latest write: a worker would refuse a call approved a millisecond ago
// as "pending" or "never consumed", an approver would not find a call
// just parked on another replica.
func leaderReader(b *bus.Bus) reader {
	bucket := b.Approvals.Bucket()
	return func(ctx context.Context, key string) (*bus.KVEntry, error) {
		e, err := bus.KVGetFromLeader(ctx, b.NC, bucket, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
		}
		if err != nil {
			return nil, fmt.Errorf("approvals: read %s: %w", key, err)
		}
		return e, nil
	}
}

// getRecord reads the record of call id in tenant.
func getRecord(ctx context.Context, read reader, tenant, id string) (*Record, error) {
	e, err := read(ctx, CallKey(tenant, id))
	if err != nil {
		return nil, err
	}
	return decodeRecord(e.Value, e.Revision)
}

// ConsumeNonce marks nonce used by call callID of tenant: a KV create, so
// of everything that tries, one succeeds. It returns nil when the nonce
// is now (or already was) marked for callID, ErrNonceUsed when another
// call used it. The mark is kept until until plus the retention, so it
// outlives the approval that carries the nonce.
func (s *Store) ConsumeNonce(ctx context.Context, tenant, nonce, callID string, until time.Time) error {
	if !validNonce(nonce) || !bus.ValidTenant(tenant) {
		return fmt.Errorf("%w: malformed nonce", ErrNonceUsed)
	}
	key := NonceKey(tenant, nonce)
	ttl := max(time.Until(until), 0) + s.retain
	_, err := s.write(ctx, key, 0, []byte(callID), ttl, nil)
	if !errors.Is(err, ErrConflict) {
		return err
	}
	e, gerr := s.read(ctx, key)
	if gerr != nil {
		return gerr
	}
	if used := string(e.Value); used != callID {
		return fmt.Errorf("%w (by call %s)", ErrNonceUsed, used)
	}
	return nil
}

// nonceUser returns the call id that consumed nonce; ErrNotFound when
// nobody did.
func nonceUser(ctx context.Context, read reader, tenant, nonce string) (string, error) {
	if !validNonce(nonce) {
		return "", fmt.Errorf("%w: malformed nonce", ErrNotFound)
	}
	e, err := read(ctx, NonceKey(tenant, nonce))
	if err != nil {
		return "", err
	}
	return string(e.Value), nil
}

// Grant is a stored grant: the policy engine's Grant and when it was made.
type Grant struct {
	policy.Grant
	CreatedAt time.Time `json:"created_at"`
}

// grantMarkerTTL is how long the marker of a revoked grant stays (so every
// replica's watch sees the revocation) before it vanishes.
const grantMarkerTTL = time.Hour

// PutGrant stores a new grant (it must Validate, and have an id of its
// own, a ULID). A grant with an expiry vanishes from the bucket a little
// after it (per-key TTL); one without lasts until revoked.
func (s *Store) PutGrant(ctx context.Context, g *Grant) error {
	if err := g.Validate(); err != nil {
		return err
	}
	if !ValidID(g.ID) || !bus.ValidTenant(g.Tenant) {
		return fmt.Errorf("%w: id %q is not a ULID", policy.ErrBadGrant, g.ID)
	}
	data, err := json.Marshal(g)
	if err != nil {
		return fmt.Errorf("approvals: encode grant: %w", err)
	}
	var ttl time.Duration
	if !g.Expires.IsZero() {
		ttl = time.Until(g.Expires) + time.Minute
	}
	_, err = s.write(ctx, GrantKey(g.Tenant, g.ID), 0, data, ttl, nil)
	return err
}

// GetGrant reads grant id of tenant; ErrNotFound when there is none.
func (s *Store) GetGrant(ctx context.Context, tenant, id string) (*Grant, error) {
	return getGrant(ctx, s.read, tenant, id)
}

func getGrant(ctx context.Context, read reader, tenant, id string) (*Grant, error) {
	if !ValidID(id) || !bus.ValidTenant(tenant) {
		return nil, fmt.Errorf("%w: grant %q", ErrNotFound, id)
	}
	e, err := read(ctx, GrantKey(tenant, id))
	if err != nil {
		return nil, err
	}
	return decodeGrant(e.Value)
}

func decodeGrant(data []byte) (*Grant, error) {
	g := &Grant{}
	if err := json.Unmarshal(data, g); err != nil {
		return nil, fmt.Errorf("%w: grant: %w", ErrCorrupt, err)
	}
	return g, nil
}

// RevokeGrant removes grant id of tenant; it reports whether the grant
// existed. Every replica's grant index drops it when its watch sees the
// removal.
func (s *Store) RevokeGrant(ctx context.Context, tenant, id string) (bool, error) {
	if !ValidID(id) || !bus.ValidTenant(tenant) {
		return false, nil
	}
	key := GrantKey(tenant, id)
	e, err := s.read(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := s.kv.Purge(ctx, key, jetstream.LastRevision(e.Revision), jetstream.PurgeTTL(grantMarkerTTL)); err != nil {
		if bus.IsCASConflict(err) {
			return false, nil // revoked (or expired) meanwhile
		}
		return false, fmt.Errorf("approvals: revoke grant %s: %w", id, err)
	}
	return true, nil
}
