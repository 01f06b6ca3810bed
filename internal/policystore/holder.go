package policystore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/policy"
)

// ErrNotInForce: Wait saw the version named in force for the scope, but
// this replica could not load it (it keeps the last good document, or
// denies everything; see doc.go).
var ErrNotInForce = errors.New("policystore: the document could not be put in force on this replica")

// Holder keeps the policies in force, per tenant, as this process sees
// them: it watches the in-force keys of the bucket, loads and parses each
// new document once and publishes a new immutable snapshot (copy on
// write), so that For takes no lock. It is the dispatcher's
// dispatch.PolicySource. Start it before the first For.
type Holder struct {
	kv  jetstream.KeyValue
	log *slog.Logger

	snap atomic.Pointer[snapshot]

	ready  chan struct{}
	done   chan struct{}
	cancel context.CancelFunc
	start  sync.Once
	stop   sync.Once
}

// held is what is in force for one scope.
type held struct {
	// stored is the version the scope's in-force record names.
	stored string
	// policy decides: the stored version's document, or when it could
	// not be loaded (failed) the last good one or denyAll.
	policy *policy.Policy
	failed bool
}

// snapshot is one immutable state of a Holder; next is closed when a newer
// one replaces it.
type snapshot struct {
	install *held
	tenants map[string]*held
	next    chan struct{}
}

func (s *snapshot) get(scope Scope) *held {
	if scope.install {
		return s.install
	}
	return s.tenants[scope.tenant]
}

// with returns a copy of s with scope's entry set to h (nil = removed).
func (s *snapshot) with(scope Scope, h *held) *snapshot {
	n := &snapshot{install: s.install, tenants: maps.Clone(s.tenants), next: make(chan struct{})}
	switch {
	case scope.install:
		n.install = h
	case h == nil:
		delete(n.tenants, scope.tenant)
	default:
		n.tenants[scope.tenant] = h
	}
	return n
}

// loaded returns a policy of version already held and loaded, nil if none.
func (s *snapshot) loaded(version string) *policy.Policy {
	if h := s.install; h != nil && !h.failed && h.stored == version {
		return h.policy
	}
	for _, h := range s.tenants {
		if !h.failed && h.stored == version {
			return h.policy
		}
	}
	return nil
}

// NewHolder returns a Holder over the policies bucket kv; log may be nil.
func NewHolder(kv jetstream.KeyValue, log *slog.Logger) *Holder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Holder{kv: kv, log: log.With("component", "policy-holder"), ready: make(chan struct{}), done: make(chan struct{})}
	h.snap.Store(&snapshot{tenants: map[string]*held{}, next: make(chan struct{})})
	return h
}

// Start watches the bucket and returns once every document in force is
// loaded; the watch runs until Stop. It fails when ctx ends first.
func (h *Holder) Start(ctx context.Context) error {
	err := errors.New("policystore: holder started twice")
	h.start.Do(func() { err = h.doStart(ctx) })
	return err
}

func (h *Holder) doStart(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		close(h.done)
		return fmt.Errorf("policystore: start: %w", err)
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w, err := h.kv.Watch(wctx, currentPrefix+">")
	if err != nil {
		cancel()
		close(h.done)
		return fmt.Errorf("policystore: watch: %w", err)
	}
	h.cancel = cancel
	go h.run(wctx, w)
	select {
	case <-h.ready:
		return nil
	case <-h.done:
		return errors.New("policystore: the watch ended before the initial load (connection closed)")
	case <-ctx.Done():
		cancel() // not Stop: it would wait for this Once
		<-h.done
		return fmt.Errorf("policystore: initial load: %w", ctx.Err())
	}
}

// Stop ends the watch and waits for it. Idempotent; safe before Start.
func (h *Holder) Stop() {
	h.stop.Do(func() {
		h.start.Do(func() { close(h.done) }) // never started: nothing to wait for
		if h.cancel != nil {
			h.cancel()
		}
		<-h.done
	})
}

func (h *Holder) run(ctx context.Context, w jetstream.KeyWatcher) {
	defer close(h.done)
	defer func() { _ = w.Stop() }()
	readyOnce := sync.OnceFunc(func() { close(h.ready) })
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				if ctx.Err() == nil {
					h.log.Error("policy watch ended (connection closed): the policies in force on this replica no longer change")
				}
				return
			}
			if e == nil {
				readyOnce()
				continue
			}
			h.handle(ctx, e)
		}
	}
}

// For returns the policy in force for tenant: its own document, else the
// installation document, else nil (no policy). It takes no lock.
func (h *Holder) For(tenant string) *policy.Policy {
	s := h.snap.Load()
	if e := s.tenants[tenant]; e != nil {
		return e.policy
	}
	if s.install != nil {
		return s.install.policy
	}
	return nil
}

// InForce returns the version scope's own in-force record names as this
// replica has seen it, "" when the scope has none.
func (h *Holder) InForce(scope Scope) string {
	if e := h.snap.Load().get(scope); e != nil {
		return e.stored
	}
	return ""
}

// Wait returns once this replica has put version in force for scope
// ("" = scope's document removed), ErrNotInForce when it saw version but
// could not load it, or ctx's error.
func (h *Holder) Wait(ctx context.Context, scope Scope, version string) error {
	for {
		s := h.snap.Load()
		e := s.get(scope)
		switch {
		case e == nil && version == "":
			return nil
		case e != nil && e.stored == version && e.failed:
			return fmt.Errorf("%w: %s %s", ErrNotInForce, scope, version)
		case e != nil && e.stored == version:
			return nil
		}
		select {
		case <-s.next:
		case <-ctx.Done():
			return fmt.Errorf("policystore: wait for %s %s: %w", scope, version, ctx.Err())
		}
	}
}

// publish makes n the snapshot in force. Only run's goroutine calls it.
func (h *Holder) publish(n *snapshot) {
	old := h.snap.Swap(n)
	close(old.next)
}

// handle applies one change of an in-force key.
func (h *Holder) handle(ctx context.Context, e jetstream.KeyValueEntry) {
	scope, ok := scopeOfToken(strings.TrimPrefix(e.Key(), currentPrefix))
	if !ok {
		h.log.Warn("policy key of no scope ignored", "key", e.Key())
		return
	}
	cur := h.snap.Load()
	if e.Operation() != jetstream.KeyValuePut {
		h.publish(cur.with(scope, nil))
		h.log.Info("policy removed", "scope", scope.String())
		return
	}
	rec, err := decodeRecord(e.Value())
	if err != nil {
		h.publish(cur.with(scope, h.failed(cur, scope, "", err)))
		return
	}
	p := cur.loaded(rec.Version)
	if p == nil {
		if p, err = h.load(ctx, scope, rec.Version); err != nil {
			h.publish(cur.with(scope, h.failed(cur, scope, rec.Version, err)))
			return
		}
	}
	h.publish(cur.with(scope, &held{stored: rec.Version, policy: p}))
	h.log.Info("policy in force", "scope", scope.String(), "version", rec.Version, "applied_by", rec.AppliedBy)
}

// failed is what stays in force for scope when the document its record
// names (version) cannot be loaded: the last good policy of the scope, or,
// when it never had one, denyAll. Never allow-all: a tenant whose
// policy cannot be read is not left without one.
func (h *Holder) failed(cur *snapshot, scope Scope, version string, err error) *held {
	out := &held{stored: version, failed: true, policy: denyAll}
	if prev := cur.get(scope); prev != nil {
		out.policy = prev.policy
	}
	h.log.Error("policy document not loaded: the previous policy stays in force, or every call is denied when there is none",
		"scope", scope.String(), "version", version, "keeps", out.policy.Version(), "err", err)
	return out
}

// loadAttempts and loadBackoff bound the retries of a document read that
// failed for a reason other than its absence (a server election).
const loadAttempts = 5

var loadBackoff = 200 * time.Millisecond

// load reads and parses scope's document of version.
func (h *Holder) load(ctx context.Context, scope Scope, version string) (*policy.Policy, error) {
	var e jetstream.KeyValueEntry
	var err error
	for i := range loadAttempts {
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(loadBackoff << (i - 1)):
			}
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		e, err = h.kv.Get(rctx, docKey(scope, version))
		cancel()
		if err == nil || errors.Is(err, jetstream.ErrKeyNotFound) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("read document: %w", err)
	}
	p, err := policy.Parse(e.Value())
	if err != nil {
		return nil, err
	}
	if p.Version() != version {
		// Another build canonicalises differently: the rules are the
		// stored ones, so they decide; records carry the parsed version.
		h.log.Warn("policy document parses to another version; re-apply it to record the new one",
			"scope", scope.String(), "stored", version, "parsed", p.Version())
	}
	return p, nil
}

// denyAllSource is the policy in force for a scope whose document cannot
// be loaded and that has no earlier one: every call denied, and said why.
const denyAllSource = `tenant:
  default: deny
  rules:
    - id: policy-unavailable
      effect: deny
      tools: ["*"]
      reason: the policy in force could not be loaded; ask an administrator
`

var denyAll = mustParse(denyAllSource)

// mustParse parses a constant document of this package (a test parses
// it too).
func mustParse(src string) *policy.Policy {
	p, err := policy.Parse([]byte(src))
	if err != nil {
		panic(fmt.Sprintf("policystore: built-in document: %v", err))
	}
	return p
}
