package approvals_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

type bundle struct {
	env   *bustest.Env
	store *approvals.Store
}

func setup(t *testing.T) *bundle {
	t.Helper()
	env := bustest.Start(t, bus.Config{})
	return &bundle{env: env, store: approvals.NewStore(env.Bus, time.Hour)}
}

// newRecord returns a pending record of a call of tool by agent in
// session of tenant, parked at created.
func newRecord(tenant, agent, session, tool string, created time.Time) *approvals.Record {
	id := ulid.MustNew(ulid.Timestamp(created), ulid.DefaultEntropy()).String()
	caller := &toolwirev1.Caller{Tenant: tenant, Agent: agent, Session: session}
	args, _ := policy.ParseArgs([]byte(`{"path":"/tmp/x"}`))
	return &approvals.Record{
		Approval: &toolwirev1.Approval{Id: id, State: toolwirev1.ApprovalState_APPROVAL_STATE_PENDING, Tool: tool, SpecVersion: "v1",
			Caller: caller, ArgumentsJson: `{"path":"/tmp/x"}`, ArgsSha256: args.Hash(), CreatedAt: timestamppb.New(created),
			ExpiresAt: timestamppb.New(created.Add(time.Hour))},
		Call: &toolwirev1.ToolCall{CallId: id, Tool: tool, SpecVersion: "v1", Arguments: []byte(`{"path":"/tmp/x"}`), Caller: caller,
			Dispatcher: "d1"},
		Nonce: approvals.NewNonce(),
	}
}

// approveRecord turns r into an approved record bound to its call.
func approveRecord(r *approvals.Record, now time.Time) {
	c := r.Call.Caller
	r.Call.ApprovalId = r.ID()
	r.Binding = &policy.Approval{ID: r.ID(), Tenant: c.Tenant, Agent: c.Agent, Session: c.Session, Tool: r.Call.Tool,
		SpecVersion: r.Call.SpecVersion, ArgsSHA256: r.Approval.ArgsSha256, Expires: now.Add(time.Hour), Approver: "boss", Nonce: r.Nonce}
	r.Approval.State, r.Approval.DecidedAt, r.Approval.Approver = toolwirev1.ApprovalState_APPROVAL_STATE_APPROVED, timestamppb.New(now), "boss"
}

// Of replicas racing to decide one record from the same read, exactly one
// compare-and-set wins; the others get ErrConflict and, reading again,
// find the decision.
func TestOneDecisionPerRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	r := newRecord("acme", "bot", "s1", "wipe", time.Now())
	require.NoError(t, b.store.Park(ctx, r))
	require.ErrorIs(t, b.store.Park(ctx, newRecordWithID(r)), approvals.ErrConflict, "a key is parked once")

	const racers = 8
	var wg sync.WaitGroup
	wins := make(chan int, racers)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine, err := b.store.Get(ctx, "acme", r.ID())
			if err != nil {
				return
			}
			mine.Approval.State = toolwirev1.ApprovalState_APPROVAL_STATE_DENIED
			mine.Approval.Approver = fmt.Sprint("racer-", i)
			if mine.Revision == r.Revision && b.store.Update(ctx, mine) == nil {
				wins <- i
			}
		}()
	}
	wg.Wait()
	close(wins)
	var won []int
	for i := range wins {
		won = append(won, i)
	}
	require.Len(t, won, 1)
	got, err := b.store.Get(ctx, "acme", r.ID())
	require.NoError(t, err)
	require.Equal(t, fmt.Sprint("racer-", won[0]), got.Approval.Approver)
	r.Approval.State = toolwirev1.ApprovalState_APPROVAL_STATE_APPROVED
	require.ErrorIs(t, b.store.Update(ctx, r), approvals.ErrConflict, "a stale revision never overwrites")

	// Another tenant's key is another record; a malformed id reads nothing.
	_, err = b.store.Get(ctx, "other", r.ID())
	require.ErrorIs(t, err, approvals.ErrNotFound)
	_, err = b.store.Get(ctx, "acme", "not-a-ulid")
	require.ErrorIs(t, err, approvals.ErrNotFound)
}

func newRecordWithID(r *approvals.Record) *approvals.Record {
	c := newRecord(r.Tenant(), "x", "", "t", time.Now())
	c.Approval.Id, c.Call.CallId = r.ID(), r.ID()
	return c
}

// A nonce is consumed once, by a KV create: the same call may mark it
// again (a finish repeated), any other call is refused.
func TestNonceIsUsedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	n := approvals.NewNonce()
	until := time.Now().Add(time.Hour)
	a, c := ulid.Make().String(), ulid.Make().String()
	require.NoError(t, b.store.ConsumeNonce(ctx, "acme", n, a, until))
	require.NoError(t, b.store.ConsumeNonce(ctx, "acme", n, a, until), "the same call again")
	err := b.store.ConsumeNonce(ctx, "acme", n, c, until)
	require.ErrorIs(t, err, approvals.ErrNonceUsed)
	require.Contains(t, err.Error(), a)
	require.NoError(t, b.store.ConsumeNonce(ctx, "other", n, c, until), "nonces are per tenant")
	require.ErrorIs(t, b.store.ConsumeNonce(ctx, "acme", "../x", c, until), approvals.ErrNonceUsed, "a malformed nonce")

	// Racing creates: one wins.
	n2 := approvals.NewNonce()
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if b.store.ConsumeNonce(ctx, "acme", n2, ulid.Make().String(), until) == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 1, ok)
}

// List reads summaries from the headers of the records' writes, filters
// them, and returns the newest matches first, at most the limit, saying
// when more matched; another tenant's records are never listed.
func TestListNewestFirstFiltered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	base := time.Now().Add(-time.Hour)
	var ids []string
	for i, c := range []struct{ agent, session, tool string }{
		{"bot", "s1", "wipe"}, {"bot", "s2", "wipe"}, {"ops", "s1", "fs_write"}, {"bot", "s1", "fs_read"}, {"ops", "s3", "wipe"},
	} {
		r := newRecord("acme", c.agent, c.session, c.tool, base.Add(time.Duration(i)*time.Minute))
		require.NoError(t, b.store.Park(ctx, r))
		ids = append(ids, r.ID())
		if i == 1 {
			r.Approval.State = toolwirev1.ApprovalState_APPROVAL_STATE_DENIED
			require.NoError(t, b.store.Update(ctx, r))
		}
	}
	require.NoError(t, b.store.Park(ctx, newRecord("other", "bot", "s1", "wipe", base)))

	list := func(f approvals.Filter) ([]string, bool) {
		t.Helper()
		recs, truncated, err := b.store.List(ctx, "acme", f)
		require.NoError(t, err)
		var out []string
		for _, r := range recs {
			out = append(out, r.ID())
		}
		return out, truncated
	}
	got, truncated := list(approvals.Filter{})
	require.Equal(t, []string{ids[4], ids[3], ids[2], ids[1], ids[0]}, got)
	require.False(t, truncated)
	got, truncated = list(approvals.Filter{Limit: 2})
	require.Equal(t, []string{ids[4], ids[3]}, got)
	require.True(t, truncated)
	got, _ = list(approvals.Filter{State: toolwirev1.ApprovalState_APPROVAL_STATE_DENIED})
	require.Equal(t, []string{ids[1]}, got)
	got, _ = list(approvals.Filter{State: toolwirev1.ApprovalState_APPROVAL_STATE_PENDING, Agent: "bot"})
	require.Equal(t, []string{ids[3], ids[0]}, got)
	got, _ = list(approvals.Filter{Tool: "fs_*"})
	require.Equal(t, []string{ids[3], ids[2]}, got)
	got, _ = list(approvals.Filter{Session: "s1", Tool: "wipe"})
	require.Equal(t, []string{ids[0]}, got)

	_, _, err := b.store.List(ctx, "acme", approvals.Filter{Tool: "["})
	require.ErrorIs(t, err, approvals.ErrBadFilter)
	_, _, err = b.store.List(ctx, "acme", approvals.Filter{Limit: approvals.MaxListLimit + 1})
	require.ErrorIs(t, err, approvals.ErrBadFilter)
	recs, _, err := b.store.List(ctx, "nobody", approvals.Filter{})
	require.NoError(t, err)
	require.Empty(t, recs)
}

// The tracker follows the headers of every write: a pending record is due
// once past its expiry, a decided one not published once past the grace,
// and a published one is forgotten.
func TestTrackerFindsWhatIsDue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	old := newRecord("acme", "bot", "", "wipe", time.Now().Add(-2*time.Hour)) // expired an hour ago
	require.NoError(t, b.store.Park(ctx, old))
	tr := approvals.NewTracker(b.store, slog.New(slog.DiscardHandler))
	require.NoError(t, tr.Start(ctx))
	defer func() { _ = tr.Stop(context.Background()) }()

	fresh := newRecord("acme", "bot", "", "wipe", time.Now())
	require.NoError(t, b.store.Park(ctx, fresh))
	due := func() []string {
		var out []string
		for _, s := range tr.Due(time.Now(), time.Second, 100) {
			out = append(out, s.ID)
		}
		return out
	}
	require.Eventually(t, func() bool { return tr.Len() == 2 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, []string{old.ID()}, due(), "only the expired one")

	approveRecord(fresh, time.Now().Add(-time.Minute))
	require.NoError(t, b.store.Update(ctx, fresh))
	require.Eventually(t, func() bool { return len(due()) == 2 }, 10*time.Second, 10*time.Millisecond)
	fresh.Published = true
	require.NoError(t, b.store.Update(ctx, fresh))
	require.Eventually(t, func() bool { return tr.Len() == 1 }, 10*time.Second, 10*time.Millisecond)
}

// Every replica's grant index sees a grant stored or revoked anywhere,
// and gives Decide the grants of the caller's tenant only.
func TestGrantIndexFollowsTheBucket(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	log := slog.New(slog.DiscardHandler)
	before := &approvals.Grant{Grant: policy.Grant{ID: ulid.Make().String(), Layer: policy.LayerTenant, Tenant: "acme", Tool: "wipe"},
		CreatedAt: time.Now()}
	require.NoError(t, b.store.PutGrant(ctx, before))
	var idx []*approvals.GrantIndex
	for range 2 {
		x := approvals.NewGrantIndex(b.store, log)
		require.NoError(t, x.Start(ctx))
		t.Cleanup(func() { _ = x.Stop(context.Background()) })
		require.Len(t, x.Grants(&toolwirev1.Caller{Tenant: "acme"}, "wipe"), 1, "loaded before Start returns")
		idx = append(idx, x)
	}
	g := &approvals.Grant{Grant: policy.Grant{ID: ulid.Make().String(), Layer: policy.LayerSession, Tenant: "acme", Agent: "bot",
		Session: "s1", Tool: "fs_*", Args: map[string]string{"path": "/tmp/**"}, Expires: time.Now().Add(time.Hour)}, CreatedAt: time.Now()}
	require.NoError(t, b.store.PutGrant(ctx, g))
	for _, x := range idx {
		require.Eventually(t, func() bool { return len(x.Grants(&toolwirev1.Caller{Tenant: "acme"}, "")) == 2 }, 10*time.Second, 5*time.Millisecond)
		require.Empty(t, x.Grants(&toolwirev1.Caller{Tenant: "other"}, "wipe"))
		require.Len(t, x.List("acme", "bot", "s1"), 1)
	}
	ok, err := b.store.RevokeGrant(ctx, "acme", g.ID)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = b.store.RevokeGrant(ctx, "acme", g.ID)
	require.NoError(t, err)
	require.False(t, ok, "revoked already")
	for _, x := range idx {
		require.Eventually(t, func() bool { return len(x.Grants(&toolwirev1.Caller{Tenant: "acme"}, "")) == 1 }, 10*time.Second, 5*time.Millisecond)
	}
	_, err = b.store.GetGrant(ctx, "acme", g.ID)
	require.ErrorIs(t, err, approvals.ErrNotFound)

	bad := &approvals.Grant{Grant: policy.Grant{ID: "g1", Layer: policy.LayerTenant, Tenant: "acme", Tool: "x"}}
	require.ErrorIs(t, b.store.PutGrant(ctx, bad), policy.ErrBadGrant, "an id that is no ULID")
	bad.ID, bad.Layer = ulid.Make().String(), policy.LayerSession
	require.ErrorIs(t, b.store.PutGrant(ctx, bad), policy.ErrBadGrant, "a session grant without session")
}

// The worker's re-check refuses every call its approval record does not
// cover exactly, and every call a grant does not.
func TestCheckCall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	now := time.Now()
	spec := &toolwirev1.ToolSpec{Name: "wipe", Version: "v1", RequiresApproval: true}

	pending := newRecord("acme", "bot", "s1", "wipe", now)
	require.NoError(t, b.store.Park(ctx, pending))
	approved := newRecord("acme", "bot", "s1", "wipe", now)
	require.NoError(t, b.store.Park(ctx, approved))
	approveRecord(approved, now)
	require.NoError(t, b.store.Update(ctx, approved))
	unconsumed := newRecord("acme", "bot", "s1", "wipe", now)
	require.NoError(t, b.store.Park(ctx, unconsumed))
	approveRecord(unconsumed, now)
	require.NoError(t, b.store.Update(ctx, unconsumed))
	require.NoError(t, b.store.ConsumeNonce(ctx, "acme", approved.Nonce, approved.ID(), now.Add(time.Hour)))

	good := func() *toolwirev1.ToolCall {
		c := approved.Call
		return &toolwirev1.ToolCall{CallId: c.CallId, Tool: c.Tool, SpecVersion: c.SpecVersion, Arguments: []byte(`{ "path" : "/tmp/x" }`),
			Caller: &toolwirev1.Caller{Tenant: "acme", Agent: "bot", Session: "s1"}, ApprovalId: approved.ID()}
	}
	require.NoError(t, approvals.CheckCall(ctx, b.env.Bus, spec, good(), now), "the same arguments, spaced differently")
	for what, change := range map[string]func(c *toolwirev1.ToolCall){
		"no approval":             func(c *toolwirev1.ToolCall) { c.ApprovalId = "" },
		"another call's approval": func(c *toolwirev1.ToolCall) { c.CallId = ulid.Make().String() },
		"other arguments":         func(c *toolwirev1.ToolCall) { c.Arguments = []byte(`{"path":"/tmp/y"}`) },
		"another version":         func(c *toolwirev1.ToolCall) { c.SpecVersion = "v2" },
		"another tool":            func(c *toolwirev1.ToolCall) { c.Tool = "fs_write" },
		"another agent":           func(c *toolwirev1.ToolCall) { c.Caller.Agent = "ops" },
		"another session":         func(c *toolwirev1.ToolCall) { c.Caller.Session = "s2" },
		"another tenant":          func(c *toolwirev1.ToolCall) { c.Caller.Tenant = "other" },
		"a pending approval":      func(c *toolwirev1.ToolCall) { c.CallId, c.ApprovalId = pending.ID(), pending.ID() },
		"a nonce never consumed":  func(c *toolwirev1.ToolCall) { c.CallId, c.ApprovalId = unconsumed.ID(), unconsumed.ID() },
		"a malformed id":          func(c *toolwirev1.ToolCall) { c.CallId, c.ApprovalId = "x.>", "x.>" },
		"an unknown grant":        func(c *toolwirev1.ToolCall) { c.ApprovalId, c.GrantId = "", ulid.Make().String() },
	} {
		c := good()
		change(c)
		err := approvals.CheckCall(ctx, b.env.Bus, spec, c, now)
		require.ErrorIs(t, err, approvals.ErrRefused, what)
		var re *approvals.RefusedError
		require.True(t, errors.As(err, &re), what)
	}
	require.ErrorIs(t, approvals.CheckCall(ctx, b.env.Bus, spec, good(), now.Add(2*time.Hour)), approvals.ErrRefused, "expired")

	// The nonce names another call: used by it.
	stolen := newRecord("acme", "bot", "s1", "wipe", now)
	require.NoError(t, b.store.Park(ctx, stolen))
	approveRecord(stolen, now)
	require.NoError(t, b.store.Update(ctx, stolen))
	require.NoError(t, b.store.ConsumeNonce(ctx, "acme", stolen.Nonce, ulid.Make().String(), now.Add(time.Hour)))
	c := good()
	c.CallId, c.ApprovalId = stolen.ID(), stolen.ID()
	err := approvals.CheckCall(ctx, b.env.Bus, spec, c, now)
	require.ErrorIs(t, err, approvals.ErrRefused)
	require.Contains(t, err.Error(), "used by call")

	// Grants: exists and covers.
	g := &approvals.Grant{Grant: policy.Grant{ID: ulid.Make().String(), Layer: policy.LayerSession, Tenant: "acme", Session: "s1",
		Tool: "wipe", Args: map[string]string{"path": "/tmp/**"}, Expires: now.Add(time.Hour)}, CreatedAt: now}
	require.NoError(t, b.store.PutGrant(ctx, g))
	byGrant := good()
	byGrant.ApprovalId, byGrant.GrantId = "", g.ID
	require.NoError(t, approvals.CheckCall(ctx, b.env.Bus, spec, byGrant, now))
	byGrant.Arguments = []byte(`{"path":"/etc/passwd"}`)
	require.ErrorIs(t, approvals.CheckCall(ctx, b.env.Bus, spec, byGrant, now), approvals.ErrRefused, "arguments the grant does not cover")
	byGrant.Arguments = []byte(`{"path":"/tmp/x"}`)
	byGrant.Caller.Session = "s2"
	require.ErrorIs(t, approvals.CheckCall(ctx, b.env.Bus, spec, byGrant, now), approvals.ErrRefused, "another session")

	// A tool that does not require approval, and a call naming nothing:
	// nothing to check, no read.
	require.NoError(t, approvals.CheckCall(ctx, b.env.Bus, &toolwirev1.ToolSpec{Name: "echo"}, &toolwirev1.ToolCall{CallId: "c"}, now))
	require.ErrorIs(t, approvals.CheckCall(ctx, b.env.Bus, spec, &toolwirev1.ToolCall{CallId: "c", Tool: "wipe"}, now), approvals.ErrRefused)
}

// A bucket that cannot be read is no refusal: the worker hands the call
// back rather than decide on a guess.
func TestCheckCallReadFailureIsNotARefusal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	call := &toolwirev1.ToolCall{CallId: ulid.Make().String(), Caller: &toolwirev1.Caller{Tenant: "acme"}}
	call.ApprovalId = call.CallId
	err := approvals.CheckCall(ctx, b.env.Bus, &toolwirev1.ToolSpec{Name: "wipe"}, call, time.Now())
	require.Error(t, err)
	require.NotErrorIs(t, err, approvals.ErrRefused)
}

// A grant index whose connection was closed under it (a killed
// dispatcher's) still ends its watch on Stop: nothing of it is left
// running (goleak, TestMain).
func TestGrantIndexStopsAfterTheConnectionClosed(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	nc, err := nats.Connect(env.URL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	b, err := bus.Open(t.Context(), nc, env.Bus.Config, bus.Options{Bind: true})
	require.NoError(t, err)
	x := approvals.NewGrantIndex(approvals.NewStore(b, time.Hour), slog.New(slog.DiscardHandler))
	require.NoError(t, x.Start(t.Context()))
	nc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, x.Stop(ctx))
}
