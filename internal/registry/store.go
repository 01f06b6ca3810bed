package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// ErrNotFound is returned for an unknown tool or version.
var ErrNotFound = errors.New("registry: not found")

// Entry is one tool version with its compiled input schema.
type Entry struct {
	Spec  *toolwirev1.ToolSpec
	Input *jsonschema.Schema
	// Loop is what of a call's arguments the loop guard compares, read
	// from Spec's input schema (policy.CompileLoopFields); nil compares
	// every member.
	Loop *policy.LoopFields
	// Seen is when the Store took the entry in. A worker creates its pool
	// consumer before it publishes a spec, so a consumer listing begun
	// after Seen shows the pool of the spec (the dispatcher's consumer
	// check relies on it).
	Seen time.Time
}

// Store is a live copy of the registry bucket, kept current by a watcher.
// Entries are immutable; Store is safe for concurrent use.
type Store struct {
	kv     jetstream.KeyValue
	log    *slog.Logger
	mu     sync.RWMutex
	cur    map[string]*Entry
	vers   map[string]*Entry // name + "@" + version
	ready  chan struct{}
	done   chan struct{}
	cancel context.CancelFunc
	// onChange are called, on the watcher's goroutine, after the current
	// tools change once the initial contents are in (OnChange).
	onChange []func()
}

// OnChange calls f after each change of the current tools (a version
// published, a tool deleted) once the initial contents are in, on the
// watcher's goroutine: f must not block.
func (s *Store) OnChange(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onChange = append(s.onChange, f)
}

// changed calls the OnChange functions.
func (s *Store) changed() {
	s.mu.RLock()
	fs := s.onChange
	s.mu.RUnlock()
	for _, f := range fs {
		f()
	}
}

// NewStore returns a Store on kv; Start fills it.
func NewStore(kv jetstream.KeyValue, log *slog.Logger) *Store {
	return &Store{kv: kv, log: log, cur: map[string]*Entry{}, vers: map[string]*Entry{},
		ready: make(chan struct{}), done: make(chan struct{})}
}

// Start loads the bucket and returns once the initial contents are in; the
// watcher keeps running until Stop.
func (s *Store) Start(ctx context.Context) error {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w, err := s.kv.WatchAll(wctx)
	if err != nil {
		cancel()
		return fmt.Errorf("registry: watch: %w", err)
	}
	s.cancel = cancel
	go s.run(wctx, w)
	select {
	case <-s.ready:
		return nil
	case <-ctx.Done():
		s.cancel()
		<-s.done
		return fmt.Errorf("registry: initial load: %w", ctx.Err())
	}
}

// Ready is closed once the initial contents are loaded.
func (s *Store) Ready() <-chan struct{} { return s.ready }

// Stop ends the watcher and waits for it, or until ctx ends (then it
// returns ctx's error). Idempotent; safe before Start (startstop.Service).
func (s *Store) Stop(ctx context.Context) error {
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) run(ctx context.Context, w jetstream.KeyWatcher) {
	defer close(s.done)
	defer func() { _ = w.Stop() }()
	readyOnce := sync.OnceFunc(func() { close(s.ready) })
	defer readyOnce()
	loaded := false // changes are told once the initial contents are in
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				loaded = true
				readyOnce()
				continue
			}
			if s.apply(e) && loaded {
				s.changed()
			}
		}
	}
}

// apply takes e in; it reports whether the current tools changed.
func (s *Store) apply(e jetstream.KeyValueEntry) bool {
	key := e.Key()
	if strings.HasPrefix(key, ApprovalPrefix) || strings.HasPrefix(key, ApproverPrefix) || strings.HasPrefix(key, SourcePrefix) ||
		strings.HasPrefix(key, signing.Prefix) {
		return false
	}
	if e.Operation() != jetstream.KeyValuePut {
		s.mu.Lock()
		_, had := s.cur[key]
		delete(s.cur, key)
		if nv, ok := strings.CutPrefix(key, "versions."); ok {
			// A version deleted or purged is gone: a call pinning it is
			// answered NOT_FOUND, never the copy this replica read once.
			// (Versions are hex hashes: the name is before the last dot.)
			if i := strings.LastIndexByte(nv, '.'); i > 0 {
				delete(s.vers, nv[:i]+"@"+nv[i+1:])
			}
		}
		s.mu.Unlock()
		return had
	}
	var spec toolwirev1.ToolSpec
	if err := proto.Unmarshal(e.Value(), &spec); err != nil {
		s.log.Warn("registry: undecodable spec ignored", "key", key, "err", err)
		return false
	}
	sch, err := DefaultSchemas.Compile(spec.InputSchemaJson)
	if err != nil {
		s.log.Warn("registry: spec with a bad schema ignored", "key", key, "err", err)
		return false
	}
	ent := &Entry{Spec: &spec, Input: sch, Loop: policy.CompileLoopFields([]byte(spec.InputSchemaJson)), Seen: time.Now()}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vers[spec.Name+"@"+spec.Version] = ent
	if strings.HasPrefix(key, "versions.") {
		return false
	}
	old := s.cur[key]
	s.cur[key] = ent
	return old == nil || old.Spec.Version != spec.Version
}

// Get returns the current version of a tool.
func (s *Store) Get(name string) (*Entry, error) {
	s.mu.RLock()
	e, ok := s.cur[name]
	s.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: tool %q", ErrNotFound, name)
	}
	return e, nil
}

// GetVersion returns one version of a tool; version "" is the current one.
func (s *Store) GetVersion(ctx context.Context, name, version string) (*Entry, error) {
	if version == "" {
		return s.Get(name)
	}
	s.mu.RLock()
	e, ok := s.vers[name+"@"+version]
	s.mu.RUnlock()
	if ok {
		return e, nil
	}
	kve, err := s.kv.Get(ctx, VersionKey(name, version))
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrInvalidKey) {
			return nil, fmt.Errorf("%w: tool %q version %q", ErrNotFound, name, version)
		}
		return nil, fmt.Errorf("registry: get version: %w", err)
	}
	s.apply(kve)
	s.mu.RLock()
	e, ok = s.vers[name+"@"+version]
	s.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: tool %q version %q", ErrNotFound, name, version)
	}
	return e, nil
}

// Filter selects tools in List.
type Filter struct {
	// NameGlob is a path.Match pattern on names; "" = all.
	NameGlob string
	// Executor; unspecified = all.
	Executor toolwirev1.ExecutorType
	// Category; unspecified = all.
	Category toolwirev1.ToolCategory
	// Scopes of the caller; a tool is listed when the caller holds all its
	// scopes. "*" holds every scope.
	Scopes []string
}

// Matches reports whether spec passes f.
func (f Filter) Matches(spec *toolwirev1.ToolSpec) bool {
	if f.NameGlob != "" {
		if ok, _ := path.Match(f.NameGlob, spec.GetName()); !ok {
			return false
		}
	}
	if f.Executor != toolwirev1.ExecutorType_EXECUTOR_TYPE_UNSPECIFIED && spec.GetExecutor() != f.Executor {
		return false
	}
	if f.Category != toolwirev1.ToolCategory_TOOL_CATEGORY_UNSPECIFIED && spec.GetCategory() != f.Category {
		return false
	}
	return HasScopes(f.Scopes, spec.GetScopes())
}

// List returns the current tools that pass f, sorted by name.
func (s *Store) List(f Filter) []*Entry {
	s.mu.RLock()
	out := make([]*Entry, 0, len(s.cur))
	for _, e := range s.cur {
		if f.Matches(e.Spec) {
			out = append(out, e)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Entry) int { return strings.Compare(a.Spec.Name, b.Spec.Name) })
	return out
}

// HasScopes reports whether held covers every scope in need.
func HasScopes(held, need []string) bool {
	if slices.Contains(held, "*") {
		return true
	}
	for _, n := range need {
		if !slices.Contains(held, n) {
			return false
		}
	}
	return true
}
