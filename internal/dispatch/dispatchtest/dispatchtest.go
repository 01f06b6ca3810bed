package dispatchtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/intents"
	"github.com/toolwire/toolwire/internal/signing"
	"github.com/toolwire/toolwire/internal/worker"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"

	"github.com/toolwire/toolwire/internal/api"
	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/workerconfig"
	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1/toolwirev1connect"
)

// Options shape a Stack. The zero value runs the built-in tools on an
// in-process native pool.
type Options struct {
	// Tools served in-process; nil = the built-in tools.
	Tools []*tool.Tool
	// NoWorker starts no in-process worker (tests bring their own).
	NoWorker bool
	// Concurrency of the in-process pool; 0 = default.
	Concurrency int
	// Auth; nil = open access as identity.Default.
	Auth identity.Authenticator
	// Bus layout; zero = defaults.
	Bus bus.Config
	// Dispatcher config; zero = defaults.
	Dispatcher dispatch.Config
}

// Stack is a running toolwire.
type Stack struct {
	Env        *bustest.Env
	Registry   *registry.Store
	Dispatcher *dispatch.Dispatcher
	// Policies is the policy holder of Dispatcher (when the options gave
	// it no Policies of their own).
	Policies *policystore.Holder
	Worker   *workerconfig.Worker
	// URL of the HTTP API.
	URL string
	// Client is a Connect client (binary protobuf) of the API.
	Client toolwirev1connect.DispatcherServiceClient
	// WorkerKeyFile is a worker signing key every dispatcher of the stack
	// trusts for every pool: what a worker process of a test signs with
	// (toolworker --signing-key).
	WorkerKeyFile string
	trust         *signing.Trust
	opts          Options
}

// Start starts a stack; everything stops when the test ends.
func Start(t testing.TB, opts Options) *Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := &Stack{Env: bustest.Start(t, opts.Bus), opts: opts}
	keys := t.TempDir()
	s.WorkerKeyFile = filepath.Join(keys, signing.LocalWorkerKey)
	if _, err := signing.KeyFile(s.WorkerKeyFile); err != nil {
		t.Fatalf("dispatchtest: worker key: %v", err)
	}
	trust, err := signing.NewTrust(keys)
	if err != nil {
		t.Fatalf("dispatchtest: worker keys: %v", err)
	}
	s.trust = trust
	if opts.Tools == nil {
		opts.Tools = builtin.Tools()
	}
	if !opts.NoWorker {
		s.Worker = s.StartWorker(t, opts.Tools...)
	}
	s.Registry = registry.NewStore(s.Env.Bus.Registry, testLogger(t))
	if err := s.Registry.Start(ctx); err != nil {
		t.Fatalf("dispatchtest: registry: %v", err)
	}
	t.Cleanup(func() { _ = s.Registry.Stop(context.Background()) })
	s.Dispatcher = s.StartDispatcher(t, opts.Dispatcher)
	s.Policies, _ = s.Dispatcher.Config().Policies.(*policystore.Holder)
	auth := opts.Auth
	if auth == nil {
		auth = identity.OpenAccess{Identity: identity.Default}
	}
	svc, err := api.NewService(api.Config{Core: s.Dispatcher, Approvals: s.Dispatcher.Approvals(),
		Policies: s.Dispatcher.PolicyOps(), Usage: s.Dispatcher.LimitGate()})
	if err != nil {
		t.Fatalf("dispatchtest: API: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle(svc.Handler(auth))
	// HTTP/1.1 and unencrypted HTTP/2 (h2c) on one listener, as the
	// dispatcher serves its API (internal/dispatchd).
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	s.Client = toolwirev1connect.NewDispatcherServiceClient(srv.Client(), srv.URL)
	for _, tl := range opts.Tools {
		if !opts.NoWorker {
			s.WaitTool(t, tl.Name())
		}
	}
	return s
}

// StartDispatcher starts a(nother) dispatcher replica on the stack's
// server and registry, stopped at the end of the test.
func (s *Stack) StartDispatcher(t testing.TB, cfg dispatch.Config) *dispatch.Dispatcher {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	if cfg.Policies == nil {
		cfg.Policies = s.StartPolicies(t, s.Env.Bus)
	}
	if cfg.WorkerKeys == nil {
		cfg.WorkerKeys = s.trust
	}
	if cfg.MaxQueueWait == 0 {
		// A loaded test machine slows every pool: the default 2s bound on
		// queue wait would refuse calls the tests are not about. The tests
		// of that bound set it (internal/dispatch, overload_test.go).
		cfg.MaxQueueWait = time.Minute
	}
	d, err := dispatch.New(s.Env.Bus, s.Registry, cfg)
	if err != nil {
		t.Fatalf("dispatchtest: dispatcher: %v", err)
	}
	if err := d.Start(t.Context()); err != nil {
		t.Fatalf("dispatchtest: start dispatcher: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := d.Stop(ctx); err != nil {
			t.Errorf("dispatchtest: stop dispatcher: %v", err)
		}
	})
	return d
}

// StartPolicies starts a policy holder on b (as every dispatcher runs
// one), stopped at the end of the test.
func (s *Stack) StartPolicies(t testing.TB, b *bus.Bus) *policystore.Holder {
	t.Helper()
	h := policystore.NewHolder(b, testLogger(t))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := h.Start(ctx); err != nil {
		t.Fatalf("dispatchtest: policies: %v", err)
	}
	t.Cleanup(func() { _ = h.Stop(context.Background()) })
	return h
}

// StartWorker starts an in-process worker serving tools on its own
// connection; it is stopped (grace 5s) at the end of the test.
func (s *Stack) StartWorker(t testing.TB, tools ...*tool.Tool) *workerconfig.Worker {
	t.Helper()
	b := s.Env.Open(t, "dispatchtest-worker")
	// The worker starts before the dispatcher: it writes the registry
	// through a Registrar of its own, as a dispatcher's in-process
	// workers do.
	w, err := workerconfig.NewWorker(t.Context(), b, nil, workerconfig.Options{Tools: tools, Concurrency: s.opts.Concurrency, Logger: testLogger(t),
		Registry: registry.NewRegistrar(b, testLogger(t), nil, "")})
	startUntilCleanup(t, w, err)
	return w
}

// StartWorkerFile starts an in-process worker built from the worker
// configuration f (a File loaded with workerconfig.Load: its pools, spec
// files, skills) on its own connection, as StartWorker does; it is
// stopped (grace 5s) at the end of the test.
func (s *Stack) StartWorkerFile(t testing.TB, f *workerconfig.File) *workerconfig.Worker {
	t.Helper()
	b := s.Env.Open(t, "dispatchtest-worker-file")
	w, err := workerconfig.NewWorker(t.Context(), b, f, workerconfig.Options{Concurrency: s.opts.Concurrency, Logger: testLogger(t),
		Registry: registry.NewRegistrar(b, testLogger(t), nil, "")})
	startUntilCleanup(t, w, err)
	return w
}

// startable is a worker: *worker.Worker, or one built from a
// configuration (*workerconfig.Worker), which also closes its executors.
type startable interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// startUntilCleanup starts w (built with err) and stops it, with a 5s
// grace, when the test ends.
func startUntilCleanup(t testing.TB, w startable, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("dispatchtest: worker: %v", err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatalf("dispatchtest: start worker: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
}

// WaitTool polls until the registry lists name, failing after 10s.
func (s *Stack) WaitTool(t testing.TB, name string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := s.Registry.Get(name); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dispatchtest: tool %q never appeared in the registry", name)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline, not synchronisation by sleep
	}
}

// WaitAccepted polls until call callID of the default tenant has an event
// readable from the events stream's leader — for a submitted call no
// worker took yet, its ACCEPTED record, which Submit sends without
// waiting for the stream to store it — failing after a minute.
func (s *Stack) WaitAccepted(t testing.TB, callID string) {
	t.Helper()
	b := s.Env.Bus
	deadline := time.Now().Add(time.Minute)
	for {
		m, err := bus.LastMsgFromLeader(t.Context(), b.JS, b.Events, b.Subjects.EventsAnyDispatcher(identity.Default.Tenant, callID))
		if err == nil && m != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dispatchtest: call %s has no stored event (err %v)", callID, err)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline, not synchronisation by sleep
	}
}

// StartExecutorWorker starts an in-process worker with one pool of type
// typ served by exec, publishing specs; it is stopped (grace 5s) at the
// end of the test. Use it with Options.NoWorker for executors other than
// native.
func (s *Stack) StartExecutorWorker(t testing.TB, typ toolwirev1.ExecutorType, exec executors.Executor, specs ...*toolwirev1.ToolSpec) *worker.Worker {
	t.Helper()
	b := s.Env.Open(t, "dispatchtest-worker-"+bus.TypeToken(typ))
	w, err := worker.New(b, worker.Config{
		Pools:     []worker.Pool{{Concurrency: s.opts.Concurrency, PoolConfig: bus.PoolConfig{Type: typ}}},
		Executors: map[toolwirev1.ExecutorType]executors.Executor{typ: exec},
		Specs:     specs,
		Registry:  registry.NewRegistrar(b, testLogger(t), nil, ""),
		Logger:    testLogger(t),
	})
	startUntilCleanup(t, w, err)
	return w
}

// EndSession applies END_SESSION (with reason) to a session of the
// default tenant as an orchestrator does: with the reference applier over
// the sessions bucket, through no dispatcher.
func (s *Stack) EndSession(t testing.TB, session, reason string) {
	t.Helper()
	a := intents.NewApplier(s.Env.Bus.Sessions, intents.ApplierConfig{})
	_, err := a.Apply(t.Context(), identity.Default.Tenant, session, intents.Response{CallID: "orchestrator-" + session,
		Intents: []*toolwirev1.Intent{{Id: "end", Type: intents.EndSession, PayloadJson: `{"reason":` + strconv.Quote(reason) + `}`}},
		Spec:    &toolwirev1.ToolSpec{Name: "orchestrator", Intents: []string{intents.EndSession}}})
	if err != nil {
		t.Fatalf("dispatchtest: end session %q: %v", session, err)
	}
}

// ApplyPolicy applies doc as the installation's policy and waits until
// the stack's dispatcher holds it.
func (s *Stack) ApplyPolicy(t testing.TB, doc string) {
	t.Helper()
	a, err := policystore.NewStore(s.Env.Bus, nil).Apply(t.Context(), policystore.Installation, []byte(doc), policystore.ApplyOptions{})
	if err != nil {
		t.Fatalf("dispatchtest: apply policy: %v", err)
	}
	if err := s.Policies.Wait(t.Context(), policystore.Installation, a.Version.Version, a.Revision); err != nil {
		t.Fatalf("dispatchtest: wait for policy %s: %v", a.Version.Version, err)
	}
}

// SetMode sets the mode of a session of the default tenant through the
// stack's dispatcher (SetSessionMode), so that its next call sees it.
func (s *Stack) SetMode(t testing.TB, session, mode string) {
	t.Helper()
	if _, err := s.Dispatcher.SetSessionMode(t.Context(), identity.Default, session, mode); err != nil {
		t.Fatalf("dispatchtest: set mode %q of session %q: %v", mode, session, err)
	}
}
