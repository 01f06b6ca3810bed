package sessionview

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/intents"
	"github.com/toolwire/toolwire/internal/startstop"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// State is what admission needs of a session: whether it exists, whether
// it ended (and why), its mode and its pinned spec versions. The zero
// State is a session never written (or deleted, or purged): active,
// without a mode or pins, not opened.
type State struct {
	// Exists: the sessions bucket holds the session (an orchestrator
	// opened it with SetSessionMode, the reference applier applied an
	// intent to it, or it was ended). False for a session never written,
	// and for one deleted or purged.
	Exists bool
	// Ended: END_SESSION was applied; EndReason is its reason, cut to
	// MaxReasonBytes.
	Ended     bool
	EndReason string
	// Mode is the session's mode (SET_MODE); empty = none.
	Mode string
	// Pins are the spec versions the session pins, by tool name
	// (Session.pinned_versions; at most intents.MaxPins); nil = none.
	// Shared with the cache: read it, never write it.
	Pins map[string]string
}

// Pinned returns the spec version the session pins for tool, if any.
func (s State) Pinned(tool string) (string, bool) {
	v, ok := s.Pins[tool]
	return v, ok
}

// MaxReasonBytes bounds the end reason a cached State keeps.
const MaxReasonBytes = 256

// Config configures a View.
type Config struct {
	// Sessions is the sessions bucket (bus.Bus.Sessions). Required.
	Sessions jetstream.KeyValue
	// MaxSessions bounds the sessions cached. Default 65536 (a few MiB):
	// past it, a random cached session is dropped for each one added; a
	// dropped session is read from the bucket again when next asked for.
	MaxSessions int
	// MaxPins bounds the pinned versions cached, over all sessions.
	// Default 262144 (a pin is a tool name and a 64-character version:
	// some 30 MiB): past it, random cached sessions are dropped until the
	// pins fit, as for MaxSessions.
	MaxPins int
	// Logger; nil = slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with its defaults filled in.
func (c Config) WithDefaults() Config {
	c.MaxSessions = cmp.Or(c.MaxSessions, 65536)
	c.MaxPins = cmp.Or(c.MaxPins, 262144)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports what is wrong with c (after WithDefaults).
func (c Config) Validate() error {
	switch {
	case c.Sessions == nil:
		return errors.New("sessionview: Config.Sessions is required")
	case c.MaxSessions < 1:
		return fmt.Errorf("sessionview: Config.MaxSessions %d is not positive", c.MaxSessions)
	case c.MaxPins < 1:
		return fmt.Errorf("sessionview: Config.MaxPins %d is not positive", c.MaxPins)
	}
	return nil
}

// entry is a cached State and the bucket revision it was read at (0: the
// key did not exist when read).
type entry struct {
	State
	rev uint64
}

// View is the sessions' states as admission reads them: a bounded cache
// kept current by a watch of the sessions bucket, and a read of the
// bucket for a session it does not hold. Safe for concurrent use; a
// startstop.Service.
type View struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	cache   map[string]entry // by bucket key
	pins    int              // the pins the cached entries hold
	watcher jetstream.KeyWatcher
	// cancel ends the watch's context: nats.go ends a watch's
	// subscription goroutine only with it once the connection is closed
	// (the watcher's Stop cannot reach the server then).
	cancel  context.CancelFunc
	done    chan struct{}
	stopped bool
	// started: Start made a watch once (a lost one is replaced: rewatch);
	// rewatchAt is the last attempt to replace it; starting: a watch is
	// being made (outside mu: a network request); bg: the goroutines of
	// rewatch, which Stop waits for.
	started   bool
	rewatchAt time.Time
	starting  bool
	bg        sync.WaitGroup
	// gen counts the watches put in place. A read caches its answer only
	// if the watch in place when it began is still the one (put): a read
	// made before a new watch was in place may miss a write the new watch
	// will never deliver (review: a lost watch replaced between a read
	// and its put cached an ended session as active for good).
	gen uint64
}

// New returns a View; Start starts its watch.
func New(cfg Config) (*View, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &View{cfg: cfg, log: cfg.Logger, cache: map[string]entry{}}, nil
}

// Start watches the sessions bucket for changes from now on (its updates
// only: the cache fills with the sessions asked for and the sessions
// changed, never with the whole bucket), and returns once the watch is
// in place: every change made after Start returns reaches the cache.
// Idempotent; after Stop it returns startstop.ErrStopped.
func (v *View) Start(ctx context.Context) error {
	v.mu.Lock()
	if v.stopped {
		v.mu.Unlock()
		return startstop.ErrStopped
	}
	if v.watcher != nil || v.starting {
		v.mu.Unlock()
		return nil
	}
	v.starting = true
	v.mu.Unlock()
	// Made outside mu: a network request, which admission's reads of the
	// cache must not wait for.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w, err := v.cfg.Sessions.WatchAll(wctx, jetstream.UpdatesOnly())
	v.mu.Lock()
	defer v.mu.Unlock()
	v.starting = false
	if err != nil {
		cancel()
		return fmt.Errorf("sessionview: watch sessions: %w", err)
	}
	if v.stopped {
		_ = w.Stop()
		cancel()
		return startstop.ErrStopped
	}
	v.gen++
	v.watcher, v.cancel, v.done, v.started = w, cancel, make(chan struct{}), true
	go v.follow(wctx, w, v.done, v.gen)
	return nil
}

// Stop ends the watch and waits for its goroutine, or until ctx ends.
// It ends the watch also when the connection is already closed (a killed
// dispatcher's): the watch's context is cancelled, which ends nats.go's
// goroutine of the subscription and the View's. Idempotent; safe before
// Start. A stopped View still answers State, from the bucket.
func (v *View) Stop(ctx context.Context) error {
	v.mu.Lock()
	v.stopped = true
	w, cancel, done := v.watcher, v.cancel, v.done
	v.cache, v.pins = map[string]entry{}, 0 // no watch keeps it current any more
	v.mu.Unlock()
	// A rewatch under way ends soon (its Start sees stopped and stops the
	// watch it made).
	bgDone := make(chan struct{})
	go func() { v.bg.Wait(); close(bgDone) }()
	if w != nil {
		if err := w.Stop(); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			v.log.Debug("session watch stop", "err", err)
		}
		cancel()
	} else {
		done = nil
	}
	for done != nil || bgDone != nil {
		select {
		case <-done:
			done = nil
		case <-bgDone:
			bgDone = nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// follow applies the watch's updates until the watch ends (its updates
// channel closed) or ctx does (Stop). Ended by ctx, it takes what the
// channel holds, so that a delivery of nats.go blocked on a full channel
// returns and its goroutine ends.
func (v *View) follow(ctx context.Context, w jetstream.KeyWatcher, done chan<- struct{}, gen uint64) {
	defer close(done)
	for {
		select {
		case <-ctx.Done():
			bus.DrainWatch(w)
			return
		case e, ok := <-w.Updates():
			if !ok {
				v.lost(w)
				return
			}
			if e != nil { // nil: the end of the initial values (none: updates only)
				v.apply(e, gen)
			}
		}
	}
}

// lost handles a watch that ended without Stop (its subscription closed
// under it): nothing keeps the cache current any more, so it is emptied
// and nothing is cached until a new watch is in place; State reads the
// bucket meanwhile and starts a new watch (at most one attempt every
// rewatchEvery). Before, the cache went on answering what it held,
// however stale (review).
func (v *View) lost(w jetstream.KeyWatcher) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.stopped || v.watcher != w {
		return
	}
	v.watcher, v.cache, v.pins = nil, map[string]entry{}, 0
	if v.cancel != nil {
		v.cancel()
	}
	v.log.Warn("session watch ended; reading the sessions bucket for every call until a new watch is in place")
}

// rewatchEvery spaces the attempts to replace a lost watch.
var rewatchEvery = 5 * time.Second

// rewatch starts a new watch when the one Start made was lost (lost),
// at most once every rewatchEvery: a View that was never started, or was
// stopped, is left alone.
func (v *View) rewatch(ctx context.Context) {
	v.mu.Lock()
	due := v.started && !v.stopped && v.watcher == nil && time.Since(v.rewatchAt) >= rewatchEvery
	if due {
		v.rewatchAt = time.Now()
	}
	v.mu.Unlock()
	if !due {
		return
	}
	// In the background: the call that noticed goes on with a read of the
	// bucket; Stop waits for it.
	v.bg.Go(func() {
		if err := v.Start(context.WithoutCancel(ctx)); err != nil && !errors.Is(err, startstop.ErrStopped) {
			v.log.Warn("session watch not restarted", "err", err)
		}
	})
}

// apply puts one update of the watch in the cache.
func (v *View) apply(e jetstream.KeyValueEntry, gen uint64) {
	st := State{}
	if e.Operation() == jetstream.KeyValuePut {
		var err error
		if st, err = decode(e.Value()); err != nil {
			// Undecodable: forget it, so that the next call reads it
			// (and is answered the error).
			v.log.Warn("undecodable session in the watch", "key", e.Key(), "err", err)
			v.forget(e.Key())
			return
		}
	}
	v.put(e.Key(), entry{State: st, rev: e.Revision()}, gen)
}

// State returns the state of a tenant's session: the cached one, or else
// the bucket's (then cached). A session never written is the zero State
// (not Exists, active, without a mode), cached like any other: the watch
// replaces it when the session is written. Errors: the bucket could not be read, or holds an undecodable
// session.
func (v *View) State(ctx context.Context, tenant, session string) (State, error) {
	key := intents.SessionKey(tenant, session)
	v.mu.Lock()
	e, ok := v.cache[key]
	v.mu.Unlock()
	if ok {
		return e.State, nil
	}
	v.rewatch(ctx)
	return v.Refresh(ctx, tenant, session)
}

// Refresh reads a tenant's session from the bucket, caches it unless the
// cache holds a later revision, and returns it. A writer on this replica
// calls it after a write, so that its own next call sees the write
// without waiting for the watch.
func (v *View) Refresh(ctx context.Context, tenant, session string) (State, error) {
	key := intents.SessionKey(tenant, session)
	v.mu.Lock()
	gen := v.gen
	v.mu.Unlock()
	var e entry
	kve, err := v.cfg.Sessions.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return State{}, fmt.Errorf("sessionview: read session: %w", err)
	default:
		if e.State, err = decode(kve.Value()); err != nil {
			return State{}, err
		}
		e.rev = kve.Revision()
	}
	return v.put(key, e, gen), nil
}

// put caches e under key unless the cache holds a later revision (a read
// and the watch can race), and returns the State in force. Nothing is
// cached while the View is not watching (nothing would keep it current),
// nor an answer read under another watch than the one in place (gen: the
// watch in place when the read began).
func (v *View) put(key string, e entry, gen uint64) State {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.watcher == nil || v.stopped || gen != v.gen {
		return e.State
	}
	if old, ok := v.cache[key]; ok {
		if old.rev > e.rev {
			return old.State
		}
		v.drop(key)
	}
	for len(v.cache) > 0 && (len(v.cache) >= v.cfg.MaxSessions || v.pins+len(e.Pins) > v.cfg.MaxPins) {
		for k := range v.cache { // Go's map order: a random victim
			v.drop(k)
			break
		}
	}
	v.cache[key] = e
	v.pins += len(e.Pins)
	return e.State
}

// drop removes key from the cache (v.mu held).
func (v *View) drop(key string) {
	v.pins -= len(v.cache[key].Pins)
	delete(v.cache, key)
}

func (v *View) forget(key string) {
	v.mu.Lock()
	v.drop(key)
	v.mu.Unlock()
}

// Len is how many sessions the View caches.
func (v *View) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.cache)
}

// decode reads the State of a stored session.
func decode(b []byte) (State, error) {
	s := &toolwirev1.Session{}
	if err := proto.Unmarshal(b, s); err != nil {
		return State{}, fmt.Errorf("sessionview: undecodable session: %w", err)
	}
	reason := s.GetEndReason()
	if len(reason) > MaxReasonBytes {
		reason = strings.ToValidUTF8(reason[:MaxReasonBytes], "") + "..."
	}
	return State{Exists: true, Ended: s.GetEnded(), EndReason: reason, Mode: s.GetMode(), Pins: pinsOf(s)}, nil
}

// pinsOf is the pins of s as a State keeps them: nil for none, and at
// most intents.MaxPins of them (the applier writes no more; a session
// written otherwise is cut, and a tool cut out pins nothing here).
func pinsOf(s *toolwirev1.Session) map[string]string {
	pv := s.GetPinnedVersions()
	if len(pv) == 0 {
		return nil
	}
	if len(pv) <= intents.MaxPins {
		return pv
	}
	out := make(map[string]string, intents.MaxPins)
	for k, v := range pv {
		if len(out) == intents.MaxPins {
			break
		}
		out[k] = v
	}
	return out
}
