package policystore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/singleflight"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/policy"
)

// ErrUnavailable: Reader.For could read the bucket but not put together
// the policy in force (an undecodable record, a document missing or that
// does not parse). Like a read that fails, it is never read as "no
// policy": the caller decides nothing until it reads again.
var ErrUnavailable = errors.New("policystore: the policy in force cannot be loaded")

// Reader reads the policy in force for a tenant from the policies
// bucket's leader at the moment it is asked: the tenant's in-force
// record, else the installation's, and the document it names. It is the
// worker's (internal/worker: the pre-run policy check), which runs no
// Holder: a Holder's KV watch is a consumer on the bucket, which a
// worker's credentials may not create (internal/bus, "Permissions"), and
// it would enforce a change only once its watch delivers it, where a read
// from the leader sees every apply that has returned. Each For is one or
// two reads by key (STREAM.MSG.GET on the bucket's stream); a document is
// parsed once per version and kept (at most readerKeep versions), so the
// CEL of a policy is compiled once per worker, not per call.
type Reader struct {
	nc     *nats.Conn
	bucket string
	parse  func([]byte) (*policy.Policy, error)

	mu     sync.Mutex
	parsed map[string]*policy.Policy // by version
	// loads makes one read and parse of a version that deliveries ask
	// for at once (a CEL compile can take a second): the others wait for
	// it.
	loads singleflight.Group
}

// readerKeep bounds the parsed documents a Reader keeps.
const readerKeep = 64

// NewReader returns a Reader of b's policies bucket.
func NewReader(b *bus.Bus) *Reader {
	return &Reader{nc: b.NC, bucket: b.Config.PoliciesBucket(), parse: policy.Parse, parsed: map[string]*policy.Policy{}}
}

// For returns the policy in force for tenant now: its own document, else
// the installation's, else nil (no policy). Errors: a read that failed
// (try again), ErrUnavailable (the record or its document cannot be
// loaded; applying the document again repairs it), ErrBadScope for a
// tenant that is no valid name.
func (r *Reader) For(ctx context.Context, tenant string) (*policy.Policy, error) {
	scope, err := TenantScope(tenant)
	if err != nil {
		return nil, err
	}
	for _, s := range []Scope{scope, Installation} {
		e, err := bus.KVGetFromLeader(ctx, r.nc, r.bucket, currentKey(s))
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			continue // none, or removed: the next scope decides
		case err != nil:
			return nil, fmt.Errorf("policystore: read the %s record in force: %w", s, err)
		}
		rec, err := decodeRecord(e.Value)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, s, err)
		}
		return r.document(ctx, s, rec.Version)
	}
	return nil, nil
}

// document returns the parsed document of scope's version, read from the
// leader when it is not kept yet.
func (r *Reader) document(ctx context.Context, s Scope, version string) (*policy.Policy, error) {
	r.mu.Lock()
	p := r.parsed[version]
	r.mu.Unlock()
	if p != nil {
		return p, nil
	}
	v, err, _ := r.loads.Do(docKey(s, version), func() (any, error) { return r.load(ctx, s, version) })
	if err != nil {
		return nil, err
	}
	return v.(*policy.Policy), nil
}

// load reads and parses scope's version from the leader and keeps it.
func (r *Reader) load(ctx context.Context, s Scope, version string) (*policy.Policy, error) {
	e, err := bus.KVGetFromLeader(ctx, r.nc, r.bucket, docKey(s, version))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, fmt.Errorf("%w: %s: document %s is missing", ErrUnavailable, s, version)
	case err != nil:
		return nil, fmt.Errorf("policystore: read the %s document %s: %w", s, version, err)
	}
	p, err := r.parse(e.Value)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: document %s: %w", ErrUnavailable, s, version, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.parsed) >= readerKeep {
		clear(r.parsed) // rare: as many versions in force as that
	}
	r.parsed[version] = p
	return p, nil
}
