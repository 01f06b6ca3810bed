package dispatch_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policystore"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// limitsStack is a stack with a second dispatcher replica (its own limits
// store and policy holder) and the installation document doc in force on
// both.
func policyLimitsStack(t *testing.T, doc string) (*dispatchtest.Stack, []*dispatch.Dispatcher) {
	t.Helper()
	s := dispatchtest.Start(t, dispatchtest.Options{Concurrency: 8})
	other := s.StartDispatcher(t, dispatch.Config{Name: "replica-2"})
	a, err := policystore.NewStore(s.Env.Bus, nil).Apply(t.Context(), policystore.Installation, []byte(doc), policystore.ApplyOptions{})
	require.NoError(t, err)
	for _, d := range []*dispatch.Dispatcher{s.Dispatcher, other} {
		require.NoError(t, d.Config().Policies.(*policystore.Holder).Wait(t.Context(), policystore.Installation, a.Version.Version, a.Revision))
	}
	return s, []*dispatch.Dispatcher{s.Dispatcher, other}
}

func session(name string) identity.Identity {
	return identity.Identity{Tenant: "acme", Agent: "bot-" + name, Scopes: []string{"*"}}
}

// A budget of N calls per session admits exactly N across two replicas
// called at once; the rest are refused BUDGET_EXCEEDED with the window's
// reset, and spend nothing (another limit's refusal gives the units back).
func TestBudgetAdmitsExactlyNAcrossReplicas(t *testing.T) {
	t.Parallel()
	s, replicas := policyLimitsStack(t, `limits:
  - id: per-session
    key: session
    tools: [echo]
    budget: {units: 7, window: 24h}
`)
	_ = s
	var mu sync.Mutex
	counts := map[toolwirev1.ErrorType]int{}
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			o := &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: fmt.Sprintf(`{"text":"hi %d"}`, i), Session: "s-1"}
			r, err := replicas[i%2].Call(t.Context(), session("a"), o, 30*time.Second)
			require.NoError(t, err)
			require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State)
			mu.Lock()
			defer mu.Unlock()
			counts[r.Response.GetError().GetType()]++
			if e := r.Response.GetError(); e != nil {
				require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_BUDGET_EXCEEDED, e.Type, e.Message)
				require.Positive(t, e.GetRetryAfter().AsDuration())
				require.Contains(t, e.Message, `limit "per-session"`)
			}
		})
	}
	wg.Wait()
	require.Equal(t, 7, counts[toolwirev1.ErrorType_ERROR_TYPE_UNSPECIFIED], "exactly the budget ran: %v", counts)
	require.Equal(t, 23, counts[toolwirev1.ErrorType_ERROR_TYPE_BUDGET_EXCEEDED])

	// Another session has a budget of its own; another tool none.
	r, err := replicas[0].Call(t.Context(), session("a"), &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"hi"}`, Session: "s-2"}, 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.Ok, "%v", r.Response.GetError())
}

// A rate refuses RATE_LIMIT with retry_after; the budget units the refused
// call had spent are given back; a refusal is recorded with the limit.
func TestRateRefusesAndRefusedCallsSpendNothing(t *testing.T) {
	t.Parallel()
	_, replicas := policyLimitsStack(t, `limits:
  - id: slow
    key: agent
    rate: {count: 2, per: 1h}
  - id: daily
    key: agent
    budget: {units: 100, window: 24h}
    reason: a hundred calls a day
`)
	call := func(i int) *toolwirev1.ToolResponse {
		r, err := replicas[i%2].Call(t.Context(), session("r"), &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"hi"}`}, 30*time.Second)
		require.NoError(t, err)
		return r.Response
	}
	require.True(t, call(0).Ok)
	require.True(t, call(1).Ok)
	for i := range 5 {
		r := call(i)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT, r.GetError().GetType(), "%v", r.GetError())
		require.Greater(t, r.GetError().GetRetryAfter().AsDuration(), 20*time.Minute, "the next unit comes in half an hour")
		require.True(t, r.GetError().Retryable)
	}
	u, err := replicas[0].Usage(t.Context(), session("r"), dispatch.UsageFilter{})
	require.NoError(t, err)
	require.Len(t, u, 2)
	require.Equal(t, "daily", u[0].Limit)
	require.EqualValues(t, 2, u[0].Used, "the five refused calls spent nothing")
	require.EqualValues(t, 98, u[0].Remaining)
	require.Equal(t, "a hundred calls a day", u[0].Reason)
}

// A concurrency cap holds across replicas: with a cap of 1, a second call
// while one runs is refused RATE_LIMIT; once the first has finished its
// slot is back.
func TestConcurrencyCapAcrossReplicas(t *testing.T) {
	t.Parallel()
	_, replicas := policyLimitsStack(t, `limits:
  - id: one-at-a-time
    key: tenant
    tools: [sleep]
    concurrency: 1
`)
	first, err := replicas[0].Submit(t.Context(), session("c"), &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"5s"}`})
	require.NoError(t, err)
	require.Nil(t, first.Rejected)
	second, err := replicas[1].Submit(t.Context(), session("c"), &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"1ms"}`})
	require.NoError(t, err)
	require.NotNil(t, second.Rejected, "one runs already")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT, second.Rejected.GetError().GetType())
	r, err := replicas[0].GetResult(t.Context(), session("c"), first.CallID, 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.Ok)
	require.Eventually(t, func() bool {
		s, err := replicas[1].Submit(context.WithoutCancel(t.Context()), session("c"), &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"1ms"}`})
		return err == nil && s.Rejected == nil
	}, 20*time.Second, 50*time.Millisecond, "the slot comes back with the first call's result")
}

// With a wait, a call over a concurrency cap waits for a slot instead of
// being refused: it is admitted once the running call's result frees it
// (on another replica), and refused RATE_LIMIT when no slot comes free
// within its schedule-to-start.
func TestConcurrencyWaitTakesAFreedSlot(t *testing.T) {
	t.Parallel()
	_, replicas := policyLimitsStack(t, `limits:
  - id: one-at-a-time
    key: tenant
    tools: [sleep]
    concurrency: 1
    wait: 25s
`)
	first, err := replicas[0].Submit(t.Context(), session("w"), &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"500ms"}`})
	require.NoError(t, err)
	require.Nil(t, first.Rejected)
	second, err := replicas[1].Submit(t.Context(), session("w"), &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"10s"}`})
	require.NoError(t, err)
	require.Nil(t, second.Rejected, "it waited for the slot")
	r, err := replicas[0].GetResult(t.Context(), session("w"), first.CallID, 0)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State, "the second was admitted only once the first had its result")

	third, err := replicas[0].Submit(t.Context(), session("w"), &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"1ms"}`,
		ScheduleToStart: durationpb.New(300 * time.Millisecond)})
	require.NoError(t, err)
	require.NotNil(t, third.Rejected, "no slot within its schedule-to-start")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT, third.Rejected.GetError().GetType())
	require.Contains(t, third.Rejected.GetError().GetMessage(), "waited")
}

// A key CEL cannot evaluate for a call refuses it (fail closed), naming
// the limit.
func TestLimitKeyThatCannotBeEvaluatedRefuses(t *testing.T) {
	t.Parallel()
	_, replicas := policyLimitsStack(t, `limits:
  - id: per-repo
    key: string(args.repo)
    tools: [echo]
    concurrency: 5
`)
	r, err := replicas[0].Call(t.Context(), session("k"), &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"no repo"}`}, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.Response.GetError().GetType())
	require.Contains(t, r.Response.GetError().GetMessage(), `limit "per-repo" cannot count this call`)
}

// An ask is counted when it is parked: past the budget it is refused, not
// parked for an approver.
func TestAsksAreCountedWhenParked(t *testing.T) {
	t.Parallel()
	_, replicas := policyLimitsStack(t, `tenant:
  rules:
    - {id: echo-asks, effect: ask, tools: [echo]}
limits:
  - id: one-ask
    key: agent
    tools: [echo]
    budget: {units: 1, window: 1h}
    concurrency: 1
`)
	first, err := replicas[0].Submit(t.Context(), session("p"), &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"a"}`})
	require.NoError(t, err)
	require.NotNil(t, first.Awaiting, "parked")
	second, err := replicas[1].Submit(t.Context(), session("p"), &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"b"}`})
	require.NoError(t, err)
	require.Nil(t, second.Awaiting, "not parked")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_BUDGET_EXCEEDED, second.Rejected.GetError().GetType())
}

// Fast calls under a cap of one: each one's slot is released with its
// result, however soon the result comes (even before the publish of the
// call has returned), so the next call is admitted within moments, not
// after the lease.
func TestSlotsOfFastCallsAreReleased(t *testing.T) {
	t.Parallel()
	_, replicas := policyLimitsStack(t, `loop_guard: {enabled: false}
limits:
  - id: one
    key: tenant
    tools: [echo]
    concurrency: 1
`)
	for i := range 10 {
		require.Eventually(t, func() bool {
			r, err := replicas[0].Call(context.WithoutCancel(t.Context()), session("f"), &toolwirev1.CallRequest{Tool: "echo",
				ArgumentsJson: `{"text":"fast"}`}, 30*time.Second)
			return err == nil && r.Response.Ok
		}, 5*time.Second, 10*time.Millisecond, "call %d admitted once the one before released its slot", i)
	}
}
