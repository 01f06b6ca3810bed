package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/approvalflow"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/signing"
	"github.com/toolwire/toolwire/internal/workerconfig"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// denyEtc denies every call of wipe under /etc: applied after the calls
// below were approved (or granted) and queued.
const denyEtc = `tenant:
  default: allow
  rules:
    - id: no-etc
      effect: deny
      tools: [wipe]
      args: {path: "/etc/**"}
      reason: etc is off limits
`

// policyStack is a dispatcher (every permission, with its policy holder)
// and worker processes' worth of parts on a server that takes the role
// credentials: each worker dials with the worker credential and signs
// with a key the dispatcher trusts for the pool "native".
type policyStack struct {
	// flaky: a call of wipe for /etc/flaky tells started, waits for
	// release and fails (retryable) on its first attempt.
	started, release chan struct{}
	env              *bustest.RoleEnv
	d                *dispatch.Dispatcher
	key              *signing.Key
	mu               sync.Mutex
	runs             map[string]int
	wipe             *tool.Tool
	store            *policystore.Store
	reg              *registry.Store
}

func startPolicyStack(t *testing.T) *policyStack {
	t.Helper()
	ctx := t.Context()
	log := slog.New(slog.DiscardHandler)
	s := &policyStack{env: bustest.StartWithRoles(t), runs: map[string]int{}, started: make(chan struct{}), release: make(chan struct{})}
	s.wipe = tool.Must(tool.New("wipe", func(ctx context.Context, in pathArgs) (string, error) {
		info, _ := tool.CallInfoFrom(ctx)
		s.mu.Lock()
		s.runs[info.CallID]++
		first := s.runs[info.CallID] == 1
		s.mu.Unlock()
		if in.Path == "/etc/flaky" && first {
			close(s.started)
			<-s.release
			return "", tool.Transient(errors.New("the disk was busy"))
		}
		return "wiped " + in.Path, nil
	}, tool.RequiresApproval()))
	var err error
	s.key, err = signing.NewKey()
	require.NoError(t, err)
	keys := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(keys, "native.pub"), []byte(s.key.Public()+"\n"), 0o600))
	trust, err := signing.NewTrust(keys)
	require.NoError(t, err)
	reg := registry.NewStore(s.env.Bus.Registry, log)
	require.NoError(t, reg.Start(ctx))
	t.Cleanup(func() { _ = reg.Stop(context.Background()) })
	s.reg = reg
	holder := policystore.NewHolder(s.env.Bus, log)
	require.NoError(t, holder.Start(ctx))
	t.Cleanup(func() { _ = holder.Stop(context.Background()) })
	s.store = policystore.NewStore(s.env.Bus, log)
	s.d, err = dispatch.New(s.env.Bus, reg, dispatch.Config{Logger: log, WorkerKeys: trust, Policies: holder, MaxQueueWait: time.Minute})
	require.NoError(t, err)
	require.NoError(t, s.d.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = s.d.Stop(ctx)
	})
	return s
}

// startWorker starts a worker process's worker: the worker credential,
// the stack's signing key, announcing wipe to the dispatcher. It waits
// until the registry lists wipe.
func (s *policyStack) startWorker(t *testing.T, name string) *workerconfig.Worker {
	t.Helper()
	ctx := t.Context()
	nc, err := bus.Dial(bus.ConnConfig{URL: s.env.Server.ClientURL(), Name: name, CredsFile: bus.CredentialsFile(s.env.Creds.Dir, bus.RoleWorker),
		InboxPrefix: bus.InboxPrefix(s.env.Bus.Config, bus.RoleWorker)}, nats.MaxReconnects(0))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	log := slog.New(slog.DiscardHandler)
	wb, err := bus.Open(ctx, nc, s.env.Bus.Config, bus.Options{Bind: true, Signer: s.key, Logger: log})
	require.NoError(t, err)
	w, err := workerconfig.NewWorker(ctx, wb, nil, workerconfig.Options{Tools: []*tool.Tool{s.wipe}, Logger: log, Name: name})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	require.Eventually(t, func() bool {
		_, err := s.reg.Get("wipe")
		return err == nil
	}, 30*time.Second, 5*time.Millisecond, "wipe never registered")
	return w
}

func (s *policyStack) submit(t *testing.T, session, path string) *dispatch.Submitted {
	t.Helper()
	sub, err := s.d.Submit(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "wipe", ArgumentsJson: `{"path":"` + path + `"}`,
		Session: session})
	require.NoError(t, err)
	return sub
}

func (s *policyStack) approve(t *testing.T, id string, scope toolwirev1.ApprovalScope) {
	t.Helper()
	approver := identity.Identity{Tenant: identity.Default.Tenant, Agent: "boss", Scopes: []string{approvalflow.ApproveScope}}
	_, _, err := s.d.Approvals().Approve(t.Context(), approver, &toolwirev1.ApproveRequest{Id: id, Scope: scope})
	require.NoError(t, err)
}

// result waits for the call's stored result.
func (s *policyStack) result(t *testing.T, id string) *toolwirev1.ToolResponse {
	t.Helper()
	b := s.env.Bus
	var m *jetstream.RawStreamMsg
	require.Eventually(t, func() bool {
		var err error
		m, err = b.Results.GetLastMsgForSubject(t.Context(), b.Subjects.Result(identity.Default.Tenant, s.d.Name(), id))
		return err == nil
	}, 30*time.Second, 10*time.Millisecond, "no result for %s", id)
	r := &toolwirev1.ToolResponse{}
	require.NoError(t, proto.Unmarshal(m.Data, r))
	return r
}

func (s *policyStack) ran() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.runs)
}

// Deny wins at every moment, also after a person's decision (issue 28,
// finding 2): calls approved, or admitted under a grant, while no worker
// was there to take them, and then covered by a deny rule before a
// worker started, are not run by the worker that takes them — answered
// PERMISSION_DENIED naming the rule, dead-lettered, counted — while an
// approved call the new policy still allows runs. The worker reads the
// policy with the worker credential. Before, the worker's pre-run check
// looked only at the approval or grant, and ran them.
func TestWorkerDoesNotRunApprovedCallsThePolicyNowDenies(t *testing.T) {
	t.Parallel()
	s := startPolicyStack(t)
	ctx := t.Context()
	first := s.startWorker(t, "worker-1")

	// A session grant for wipe under /, used once while worker-1 runs.
	g0 := s.submit(t, "s1", "/etc/g0")
	require.NotNil(t, g0.Awaiting)
	s.approve(t, g0.CallID, toolwirev1.ApprovalScope_APPROVAL_SCOPE_SESSION)
	require.True(t, s.result(t, g0.CallID).Ok)

	// No worker: the approved calls and the granted one wait in the pool.
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, first.Stop(stopCtx))
	keep, etc := s.submit(t, "s2", "/srv/keep"), s.submit(t, "s2", "/etc/passwd")
	require.NotNil(t, keep.Awaiting)
	require.NotNil(t, etc.Awaiting)
	s.approve(t, keep.CallID, toolwirev1.ApprovalScope_APPROVAL_SCOPE_ONCE)
	s.approve(t, etc.CallID, toolwirev1.ApprovalScope_APPROVAL_SCOPE_ONCE)
	granted := s.submit(t, "s1", "/etc/hosts")
	require.Nil(t, granted.Awaiting, "the session's grant covers it")

	scope, err := policystore.TenantScope(identity.Default.Tenant)
	require.NoError(t, err)
	_, err = s.store.Apply(ctx, scope, []byte(denyEtc), policystore.ApplyOptions{AppliedBy: "admin"})
	require.NoError(t, err)

	second := s.startWorker(t, "worker-2")
	require.True(t, s.result(t, keep.CallID).Ok, "an approved call the policy allows still runs")
	for _, id := range []string{etc.CallID, granted.CallID} {
		r := s.result(t, id)
		require.False(t, r.Ok)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.GetError().GetType(), r.GetError().GetMessage())
		require.Contains(t, r.GetError().GetMessage(), "rule no-etc")
		require.Contains(t, r.GetError().GetMessage(), "etc is off limits")
		require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, r.GetError().GetPartialSideEffects())
	}
	require.Equal(t, map[string]int{g0.CallID: 1, keep.CallID: 1}, s.ran(), "the denied calls never ran")
	require.Equal(t, int64(2), second.Stats().PolicyRefusals)
	require.Eventually(t, func() bool {
		info, err := s.env.Bus.DLQ.Info(ctx)
		return err == nil && info.State.Msgs == 2
	}, 30*time.Second, 10*time.Millisecond, "both refusals dead-lettered")
}

// A retry run in process checks the policy again: a call approved under
// the old policy whose first attempt failed (retryable) while a deny rule
// was applied is not run a second time — answered PERMISSION_DENIED
// naming the rule, with the failed attempt's side effects. Before, only
// the first attempt was checked.
func TestWorkerChecksThePolicyBeforeARetry(t *testing.T) {
	t.Parallel()
	s := startPolicyStack(t)
	ctx := t.Context()
	w := s.startWorker(t, "worker-1")
	flaky := s.submit(t, "s1", "/etc/flaky")
	require.NotNil(t, flaky.Awaiting)
	s.approve(t, flaky.CallID, toolwirev1.ApprovalScope_APPROVAL_SCOPE_ONCE)
	select {
	case <-s.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the approved call never started")
	}
	scope, err := policystore.TenantScope(identity.Default.Tenant)
	require.NoError(t, err)
	_, err = s.store.Apply(ctx, scope, []byte(denyEtc), policystore.ApplyOptions{AppliedBy: "admin"})
	require.NoError(t, err)
	close(s.release) // the first attempt fails, retryable

	r := s.result(t, flaky.CallID)
	require.False(t, r.Ok)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.GetError().GetType(), r.GetError().GetMessage())
	require.Contains(t, r.GetError().GetMessage(), "rule no-etc")
	require.Equal(t, map[string]int{flaky.CallID: 1}, s.ran(), "not run again")
	require.Equal(t, int64(1), w.Stats().PolicyRefusals)
}
