package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/signing"
)

// poolName is what a pool's name may hold to name a registry key.
var poolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// enrol makes sure the key a worker signs with (a.Signer) may sign for
// a.Pool (internal/signing), before anything of the announcement is
// written. A key already enrolled for the pool, or a dispatcher's own
// key (the dispatcher's in-process workers sign with it), passes. Any
// other key is enrolled when the announcement came through this
// process's own code (inProcess: the dispatcher's in-process workers) or
// the Registrar's Trust allows it for the pool; otherwise the
// announcement is refused, naming what to do. The enrolment is recorded
// in the registry bucket with who enrolled it.
func (r *Registrar) enrol(ctx context.Context, a Announcement, inProcess bool) error {
	refuse := func(format string, args ...any) error {
		return &RefusedError{Reason: fmt.Sprintf(format, args...)}
	}
	if !poolName.MatchString(a.Pool) {
		return refuse("pool name %q: 1 to 64 letters, digits, '_' or '-'", a.Pool)
	}
	if a.Signer == "" && inProcess {
		return nil // signs with the process's key, or is a test's
	}
	if a.Signer == "" {
		return refuse("the announcement names no signing key (a worker older than this dispatcher signs nothing it writes; upgrade it)")
	}
	if _, err := signing.ParsePublic([]byte(a.Signer)); err != nil {
		return refuse("%v", err)
	}
	key := signing.PoolKey(a.Signer, a.Pool)
	if _, ok := r.enrolled.Load(key); ok {
		return nil
	}
	for _, k := range []string{key, signing.DispatcherKey(a.Signer)} {
		_, err := r.kv.Get(ctx, k)
		if err == nil {
			r.enrolled.Store(key, true)
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted) {
			return fmt.Errorf("registry: enrolment of %s: %w", a.Signer, err)
		}
	}
	if !inProcess {
		if r.trust == nil {
			return refuse("signing key %s is not enrolled for pool %q and this dispatcher trusts no worker keys (--worker-keys)", a.Signer, a.Pool)
		}
		if err := r.trust.Allows(a.Signer, a.Pool); err != nil {
			return refuse("%v", err)
		}
	}
	rec, err := json.Marshal(signing.Enrolment{Key: a.Signer, Pool: a.Pool, By: r.by + " for worker " + a.Worker, At: time.Now().UTC()})
	if err != nil {
		return fmt.Errorf("registry: enrolment: %w", err)
	}
	if _, err := r.kv.Create(ctx, key, rec); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("registry: enrol %s for pool %q: %w", a.Signer, a.Pool, err)
	}
	r.enrolled.Store(key, true)
	r.log.InfoContext(ctx, "worker signing key enrolled", "key", a.Signer, "pool", a.Pool, "worker", a.Worker, "in_process", inProcess)
	return nil
}

// EnrolDispatcher records pub as a dispatcher's signing key (name, for
// the record): what the dispatchers sign (their own answers, events and
// the results of their in-process workers) is believed for every call.
func EnrolDispatcher(ctx context.Context, kv jetstream.KeyValue, pub, name string) error {
	rec, err := json.Marshal(signing.Enrolment{Key: pub, Dispatcher: name, By: name, At: time.Now().UTC()})
	if err != nil {
		return fmt.Errorf("registry: enrolment: %w", err)
	}
	if _, err := kv.Create(ctx, signing.DispatcherKey(pub), rec); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("registry: enrol the dispatcher's signing key: %w", err)
	}
	return nil
}
