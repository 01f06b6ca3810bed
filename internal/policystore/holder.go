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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/bus"
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
	kv     jetstream.KeyValue
	nc     *nats.Conn
	bucket string
	log    *slog.Logger

	snap atomic.Pointer[snapshot]
	// watch watches the in-force keys (a test makes one that ends).
	watch func(ctx context.Context) (jetstream.KeyWatcher, error)
	// changed is bus.PolicyChangedSubject; nudges carries the scopes
	// announced on it to the watch goroutine.
	changed string
	nudges  chan Scope

	// Documents not loaded yet are loaded (read and parsed) off the watch
	// goroutine, one job per scope, so that a scope whose document is slow
	// to compile never holds up another's change; parse is policy.Parse
	// (a test slows it down). The jobs map is run's goroutine's own.
	parse func([]byte) (*policy.Policy, error)
	jobs  map[Scope]*loadJob
	// started: the initial values are in force (Start returned); before,
	// documents load in turn on the watch goroutine.
	started bool
	loaded  chan loadResult
	jobsWG  sync.WaitGroup

	// The fleet's asks (fleet.go): this replica's name in its answers,
	// the subject, and the answers it still owes (goroutines of fleet,
	// at most maxFleetWaits, ended by fleetCtx).
	replica     string
	inforce     string
	replicas    string               // PolicyReplicasSubject
	peersMu     sync.Mutex           // guards peers
	peers       map[string]time.Time // Holders that said they are alive, when
	fleet       sync.WaitGroup
	fleetMu     sync.Mutex // guards fleetClosed and fleet.Go against closeFleet
	fleetClosed bool
	fleetSlots  chan struct{}
	fleetCtx    context.Context

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
	// revision is the record's revision.
	revision uint64
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

// anyFailed reports whether some scope's document could not be loaded.
func (s *snapshot) anyFailed() bool {
	if s.install != nil && s.install.failed {
		return true
	}
	for _, h := range s.tenants {
		if h.failed {
			return true
		}
	}
	return false
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

// NewHolder returns a Holder over b's policies bucket; log may be nil.
func NewHolder(b *bus.Bus, log *slog.Logger) *Holder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Holder{kv: b.Policies, nc: b.NC, bucket: b.Policies.Bucket(), changed: bus.PolicyChangedSubject(b.Config),
		nudges: make(chan Scope, 64), log: log.With("component", "policy-holder"), ready: make(chan struct{}), done: make(chan struct{}),
		parse: policy.Parse, jobs: map[Scope]*loadJob{}, loaded: make(chan loadResult),
		replica: replicaName(), inforce: bus.PolicyInForceSubject(b.Config), replicas: bus.PolicyReplicasSubject(b.Config),
		peers: map[string]time.Time{}, fleetSlots: make(chan struct{}, maxFleetWaits)}
	h.snap.Store(&snapshot{tenants: map[string]*held{}, next: make(chan struct{})})
	h.watch = func(ctx context.Context) (jetstream.KeyWatcher, error) { return h.kv.Watch(ctx, currentPrefix+">") }
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
	h.fleetCtx = wctx
	sub, err := h.nc.Subscribe(h.changed, h.nudge)
	if err != nil {
		cancel()
		close(h.done)
		return fmt.Errorf("policystore: subscribe %s: %w", h.changed, err)
	}
	asks, err := h.nc.Subscribe(h.inforce, h.answerAsk)
	if err != nil {
		_ = sub.Unsubscribe()
		cancel()
		close(h.done)
		return fmt.Errorf("policystore: subscribe %s: %w", h.inforce, err)
	}
	peers, err := h.nc.Subscribe(h.replicas, h.notePeer)
	if err != nil {
		_, _ = sub.Unsubscribe(), asks.Unsubscribe()
		cancel()
		close(h.done)
		return fmt.Errorf("policystore: subscribe %s: %w", h.replicas, err)
	}
	h.sayAlive()
	w, err := h.watch(wctx)
	if err != nil {
		_, _, _ = sub.Unsubscribe(), asks.Unsubscribe(), peers.Unsubscribe()
		cancel()
		close(h.done)
		return fmt.Errorf("policystore: watch: %w", err)
	}
	h.cancel = cancel
	go func() {
		defer close(h.done)
		defer h.closeFleet() // the answers still owed end with wctx
		defer func() { _, _, _ = sub.Unsubscribe(), asks.Unsubscribe(), peers.Unsubscribe() }()
		h.run(wctx, w)
	}()
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

// Stop ends the watch and waits for it, or until ctx ends (then it
// returns ctx's error, and a later Stop waits again). Idempotent; safe
// before Start (startstop.Service).
func (h *Holder) Stop(ctx context.Context) error {
	h.stop.Do(func() {
		h.start.Do(func() { close(h.done) }) // never started: nothing to wait for
		if h.cancel != nil {
			h.cancel()
		}
	})
	select {
	case <-h.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Back-offs of the holder: how soon a watch that ended is made again,
// and how soon a scope whose document could not be loaded is tried again
// (each doubling up to its maximum).
var (
	rewatchMin, rewatchMax = 100 * time.Millisecond, 10 * time.Second
	reloadMin, reloadMax   = time.Second, 30 * time.Second
)

// run follows the watch until ctx ends, watching again whenever the watch
// ends (its connection closed and reopened, say): a replica whose watch
// stopped would otherwise keep its policies for good.
func (h *Holder) run(ctx context.Context, w jetstream.KeyWatcher) {
	defer h.jobsWG.Wait() // ctx is done: the jobs stop
	ready := sync.OnceFunc(func() { close(h.ready) })
	reload := reloadMin
	for wait := rewatchMin; ; {
		if h.follow(ctx, w, ready, &reload) {
			wait = rewatchMin
		}
		_ = w.Stop()
		for w = nil; w == nil; {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			var err error
			if w, err = h.watch(ctx); err != nil {
				w = nil
				h.log.Warn("policy watch not made again; the policies in force here do not change meanwhile", "err", err, "retry_in", wait)
			}
			wait = min(2*wait, rewatchMax)
		}
	}
}

// follow applies w's changes until w or ctx ends. It reports whether w
// delivered the values in force when it was made (after which a scope it
// did not name has been removed meanwhile). While a scope's document
// cannot be loaded it is tried again every *reload (doubling).
func (h *Holder) follow(ctx context.Context, w jetstream.KeyWatcher, ready func(), reload *time.Duration) bool {
	seen := map[Scope]bool{}
	initial := true
	var retry <-chan time.Time
	alive := time.NewTicker(PresenceEvery)
	defer alive.Stop()
	for {
		if retry == nil && h.snap.Load().anyFailed() {
			retry = time.After(*reload)
		}
		select {
		case <-ctx.Done():
			return !initial
		case <-retry:
			retry = nil
			if h.reloadFailed(ctx) {
				*reload = min(2**reload, reloadMax)
			} else {
				*reload = reloadMin
			}
		case scope := <-h.nudges:
			h.reload(ctx, scope)
		case r := <-h.loaded:
			h.finishLoad(r)
		case <-alive.C:
			h.sayAlive()
		case e, ok := <-w.Updates():
			if !ok {
				if ctx.Err() == nil {
					h.log.Warn("policy watch ended; watching again")
				}
				return !initial
			}
			if e == nil {
				if initial {
					h.dropUnseen(seen)
					initial, h.started = false, true
					ready() // the initial values were loaded in turn (put)
				}
				continue
			}
			if scope, ok := h.handle(ctx, e); ok && initial {
				seen[scope] = true
			}
		}
	}
}

// nudge passes an announced change (bus.PolicyChangedSubject) to the
// watch goroutine; when it is busy the announcement is dropped, the watch
// brings the change all the same.
func (h *Holder) nudge(m *nats.Msg) {
	scope, ok := scopeOfToken(string(m.Data))
	if !ok {
		return
	}
	select {
	case h.nudges <- scope:
	default:
	}
}

// dropUnseen removes the scopes a new watch's initial values did not name:
// removed while no watch ran.
func (h *Holder) dropUnseen(seen map[Scope]bool) {
	cur := h.snap.Load()
	n := cur
	if cur.install != nil && !seen[Installation] {
		n = n.with(Installation, nil)
	}
	for t := range cur.tenants {
		if !seen[Scope{tenant: t}] {
			n = n.with(Scope{tenant: t}, nil)
		}
	}
	if n != cur {
		h.publish(n)
	}
}

// reload reads scope's in-force record from the leader and puts it in
// force.
func (h *Holder) reload(ctx context.Context, scope Scope) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	e, err := bus.KVGetFromLeader(rctx, h.nc, h.bucket, currentKey(scope))
	cancel()
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		if e != nil {
			h.remove(scope, e.Revision)
		}
	case err != nil:
		h.log.Warn("policy record not read", "scope", scope.String(), "err", err)
	default:
		h.put(ctx, scope, e.Value, e.Revision)
	}
}

// reloadFailed reads the in-force record of each scope whose document
// could not be loaded again (from the leader) and loads it; it reports
// whether some scope still failed.
func (h *Holder) reloadFailed(ctx context.Context) bool {
	cur := h.snap.Load()
	failed := []Scope{}
	if cur.install != nil && cur.install.failed {
		failed = append(failed, Installation)
	}
	for t, e := range cur.tenants {
		if e.failed {
			failed = append(failed, Scope{tenant: t})
		}
	}
	for _, scope := range failed {
		h.reload(ctx, scope)
	}
	return h.snap.Load().anyFailed()
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

// ErrSuperseded: Wait saw a later record of the scope than the one it
// waited for, naming another version.
var ErrSuperseded = errors.New("policystore: a later apply replaced the version")

// Wait returns once this replica has seen scope's in-force record at
// revision (Applied.Revision, or a KV put's) or later: nil when it names
// version and is loaded, ErrNotInForce when it names version but could
// not be loaded (it is tried again meanwhile), ErrSuperseded when a later
// record names another version; or ctx's error. Version "" waits for the
// scope's removal (at revision, a removal's; 0 = any), or for an
// undecodable record at revision (ErrNotInForce).
func (h *Holder) Wait(ctx context.Context, scope Scope, version string, revision uint64) error {
	for {
		s := h.snap.Load()
		e := s.get(scope)
		switch {
		case e == nil:
			if version == "" {
				return nil // removed
			}
		case e.revision < revision, version == "" && revision == 0:
		case e.stored != version:
			return fmt.Errorf("%w: %s %q by %s", ErrSuperseded, scope, version, e.stored)
		case e.failed:
			return fmt.Errorf("%w: %s %s", ErrNotInForce, scope, version)
		default:
			return nil
		}
		select {
		case <-s.next:
		case <-ctx.Done():
			return fmt.Errorf("policystore: wait for %s %s: %w", scope, version, ctx.Err())
		}
	}
}

// publish makes n the snapshot in force. Only run's goroutine calls it
// (the load jobs hand their results to it).
func (h *Holder) publish(n *snapshot) {
	old := h.snap.Swap(n)
	close(old.next)
}

// handle applies one change of an in-force key and returns its scope.
func (h *Holder) handle(ctx context.Context, e jetstream.KeyValueEntry) (Scope, bool) {
	scope, ok := scopeOfToken(strings.TrimPrefix(e.Key(), currentPrefix))
	if !ok {
		h.log.Warn("policy key of no scope ignored", "key", e.Key())
		return Scope{}, false
	}
	if e.Operation() != jetstream.KeyValuePut {
		h.remove(scope, e.Revision())
		return scope, true
	}
	h.put(ctx, scope, e.Value(), e.Revision())
	return scope, true
}

// remove takes scope's document out of force, unless a later record is
// in force already (the watch can deliver after a read from the leader).
func (h *Holder) remove(scope Scope, revision uint64) {
	cur := h.snap.Load()
	if j := h.jobs[scope]; j != nil && j.revision < revision {
		h.cancelJob(scope) // removed before its document was loaded
	}
	prev := cur.get(scope)
	if prev == nil || prev.revision > revision {
		return
	}
	h.publish(cur.with(scope, nil))
	h.log.Info("policy removed", "scope", scope.String())
}

// put puts the record value (of revision) in force for scope.
func (h *Holder) put(ctx context.Context, scope Scope, value []byte, revision uint64) {
	cur := h.snap.Load()
	if prev := cur.get(scope); prev != nil && (prev.revision > revision || !prev.failed && prev.revision == revision) {
		return // in force already, or older than what is (the watch lags a read from the leader)
	}
	rec, err := decodeRecord(value)
	if err != nil {
		h.cancelJob(scope)
		h.publish(cur.with(scope, h.failed(cur, scope, "", revision, err)))
		return
	}
	if p := cur.loaded(rec.Version); p != nil {
		h.cancelJob(scope)
		h.inForce(cur, scope, rec, revision, p)
		return
	}
	if !h.started {
		// Start returns once the documents in force are loaded: before it
		// did, they load in turn, here (as many as there are scopes, once).
		p, err := h.load(ctx, scope, rec.Version)
		h.finishLoad(loadResult{job: h.claimJob(scope, revision), scope: scope, rec: rec, p: p, err: err})
		return
	}
	if j := h.jobs[scope]; j != nil {
		if j.revision >= revision {
			return // being loaded already
		}
		j.cancel() // a later record: its result is dropped
	}
	h.startLoad(ctx, scope, rec, revision)
}

// claimJob makes a job of scope's load at revision done in place (no
// goroutine), replacing any other.
func (h *Holder) claimJob(scope Scope, revision uint64) *loadJob {
	h.cancelJob(scope)
	j := &loadJob{scope: scope, revision: revision, cancel: func() {}}
	h.jobs[scope] = j
	return j
}

// inForce publishes p, the document of rec, in force for scope.
func (h *Holder) inForce(cur *snapshot, scope Scope, rec *record, revision uint64, p *policy.Policy) {
	h.publish(cur.with(scope, &held{stored: rec.Version, revision: revision, policy: p}))
	h.log.Info("policy in force", "scope", scope.String(), "version", rec.Version, "applied_by", rec.AppliedBy)
}

// loadJob loads one scope's document off the watch goroutine.
type loadJob struct {
	scope    Scope
	revision uint64
	cancel   context.CancelFunc
}

// loadResult is a finished loadJob's outcome.
type loadResult struct {
	job   *loadJob
	scope Scope
	rec   *record
	p     *policy.Policy
	err   error
}

// startLoad loads rec's document for scope in a job of its own; its
// result comes back to the watch goroutine (finishLoad).
func (h *Holder) startLoad(ctx context.Context, scope Scope, rec *record, revision uint64) {
	jctx, cancel := context.WithCancel(ctx)
	j := &loadJob{scope: scope, revision: revision, cancel: cancel}
	h.jobs[scope] = j
	h.jobsWG.Go(func() {
		defer cancel()
		p, err := h.load(jctx, scope, rec.Version)
		select {
		case h.loaded <- loadResult{job: j, scope: scope, rec: rec, p: p, err: err}:
		case <-ctx.Done():
		}
	})
}

// cancelJob drops scope's load in progress, if any.
func (h *Holder) cancelJob(scope Scope) {
	if j := h.jobs[scope]; j != nil {
		j.cancel()
		delete(h.jobs, scope)
	}
}

// finishLoad puts a job's document in force, unless a later record of its
// scope replaced the job meanwhile.
func (h *Holder) finishLoad(r loadResult) {
	if h.jobs[r.scope] != r.job {
		return // superseded
	}
	delete(h.jobs, r.scope)
	cur := h.snap.Load()
	if prev := cur.get(r.scope); prev != nil && prev.revision > r.job.revision {
		return
	}
	if r.err != nil {
		h.publish(cur.with(r.scope, h.failed(cur, r.scope, r.rec.Version, r.job.revision, r.err)))
		return
	}
	h.inForce(cur, r.scope, r.rec, r.job.revision, r.p)
}

// failed is what stays in force for scope when the document its record
// names (version) cannot be loaded: the last good policy of the scope, or,
// when it never had one, denyAll. Never allow-all: a tenant whose
// policy cannot be read is not left without one.
func (h *Holder) failed(cur *snapshot, scope Scope, version string, revision uint64, err error) *held {
	out := &held{stored: version, revision: revision, failed: true, policy: denyAll}
	if prev := cur.get(scope); prev != nil {
		out.policy = prev.policy
	}
	h.log.Error("policy document not loaded: the previous policy stays in force, or every call is denied when there is none; trying again",
		"scope", scope.String(), "version", version, "keeps", out.policy.Version(), "err", err)
	return out
}

// loadAttempts and loadBackoff bound the retries of a document read that
// failed for a reason other than its absence (a server election).
const loadAttempts = 5

var loadBackoff = 200 * time.Millisecond

// load reads and parses scope's document of version.
func (h *Holder) load(ctx context.Context, scope Scope, version string) (*policy.Policy, error) {
	var e *bus.KVEntry
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
		e, err = bus.KVGetFromLeader(rctx, h.nc, h.bucket, docKey(scope, version))
		cancel()
		if err == nil || errors.Is(err, jetstream.ErrKeyNotFound) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("read document: %w", err)
	}
	p, err := h.parse(e.Value)
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

// UnavailableRule is the rule of the stand-in policy (denyAll) that
// decides for a scope whose document could not be loaded.
const UnavailableRule = "policy-unavailable"

// denyAllSource is the policy in force for a scope whose document cannot
// be loaded and that has no earlier one: every call denied, and said why.
const denyAllSource = `tenant:
  default: deny
  rules:
    - id: ` + UnavailableRule + `
      effect: deny
      tools: ["*"]
      reason: the policy in force could not be loaded; ask an administrator
`

var denyAll = mustParse(denyAllSource)

// IsStandIn reports whether p is the stand-in policy For returns for a
// scope whose document could not be loaded and that had no earlier one
// (every call denied by UnavailableRule): a reader that must not act on a
// failed load (the approval sweep ending parked calls) tells it apart.
func IsStandIn(p *policy.Policy) bool { return p != nil && p == denyAll }

// StandIn is the stand-in policy (IsStandIn): what For returns for a
// scope whose document could not be loaded and that had no earlier one.
func StandIn() *policy.Policy { return denyAll }

// mustParse parses a constant document of this package (a test parses
// it too).
func mustParse(src string) *policy.Policy {
	p, err := policy.Parse([]byte(src))
	if err != nil {
		panic(fmt.Sprintf("policystore: built-in document: %v", err))
	}
	return p
}
