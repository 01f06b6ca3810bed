package dispatch_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/approvalflow"
	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ledger counts the executions of each call id, as the tool itself saw
// them.
type ledger struct {
	mu   sync.Mutex
	runs map[string]int
}

type wipeArgs struct {
	Path string `json:"path"`
	Key  string `json:"key,omitempty" toolwire:"secret"`
}

// tool returns a tool that records each execution by call id.
func (l *ledger) tool(name string, opts ...tool.Option) *tool.Tool {
	return tool.Must(tool.New(name, func(ctx context.Context, in wipeArgs) (string, error) {
		info, _ := tool.CallInfoFrom(ctx)
		l.mu.Lock()
		l.runs[info.CallID]++
		l.mu.Unlock()
		return "done " + in.Path, nil
	}, opts...))
}

func (l *ledger) count(callID string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs[callID]
}

func (l *ledger) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.runs {
		n += c
	}
	return n
}

// fixedPolicy is a PolicySource with one policy for every tenant.
type fixedPolicy struct{ p *policy.Policy }

func (f fixedPolicy) For(string) *policy.Policy { return f.p }

func mustPolicy(t *testing.T, doc string) dispatch.PolicySource {
	t.Helper()
	p, err := policy.Parse([]byte(doc))
	require.NoError(t, err)
	return fixedPolicy{p}
}

// approver is an identity that holds the approve scope only.
var approver = identity.Identity{Tenant: "default", Agent: "boss", Scopes: []string{approvalflow.ApproveScope}}

type approvalStack struct {
	*dispatchtest.Stack
	l *ledger
}

// startApprovals starts a stack serving "wipe" (requires approval) and
// "fs_write" (asked by cfg's policy, if any), counted by a ledger.
func startApprovals(t *testing.T, cfg dispatch.Config) *approvalStack {
	t.Helper()
	l := &ledger{runs: map[string]int{}}
	s := dispatchtest.Start(t, dispatchtest.Options{Dispatcher: cfg,
		Tools: []*tool.Tool{l.tool("wipe", tool.RequiresApproval()), l.tool("fs_write")}})
	return &approvalStack{Stack: s, l: l}
}

// submit parks a call through the API and returns its answer.
func (s *approvalStack) submit(t *testing.T, req *toolwirev1.SubmitRequest) *toolwirev1.SubmitResponse {
	t.Helper()
	resp, err := s.Client.Submit(t.Context(), connect.NewRequest(req))
	require.NoError(t, err)
	return resp.Msg
}

func requireParked(t *testing.T, r *toolwirev1.ToolResponse, callID string) *toolwirev1.ApprovalRequired {
	t.Helper()
	require.False(t, r.GetOk())
	e := r.GetError()
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED, e.GetType(), e.GetMessage())
	require.False(t, e.GetRetryable())
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, e.GetPartialSideEffects())
	require.Equal(t, callID, e.GetApproval().GetApprovalId(), "the approval id is the call id")
	require.NotNil(t, e.GetApproval().GetExpiresAt())
	return e.GetApproval()
}

// waitResult waits for the terminal result of callID.
func waitResult(t *testing.T, s *dispatchtest.Stack, callID string) *toolwirev1.ToolResponse {
	t.Helper()
	r, err := s.Client.GetResult(t.Context(), connect.NewRequest(&toolwirev1.GetResultRequest{CallId: callID,
		Wait: durationpb.New(30 * time.Second)}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.Msg.State)
	return r.Msg.Response
}

// events returns the event types recorded for callID, in order.
func events(t *testing.T, s *dispatchtest.Stack, callID string) []toolwirev1.CallEventType {
	t.Helper()
	var out []toolwirev1.CallEventType
	err := s.Dispatcher.Watch(t.Context(), identity.Default, callID, func(ev *toolwirev1.CallEvent) error {
		out = append(out, ev.Type)
		return nil
	})
	require.NoError(t, err)
	return out
}

// An ask parks the exact call — nothing reaches a pool — and answers
// CONFIRMATION_REQUIRED with the approval id; GetResult, Submit and Watch
// see it parked, an approver sees it with its secret argument redacted;
// approved once, it runs exactly once and every reader sees its result.
// Before, such a call was refused for good (fail closed).
func TestAskParksTheCallUntilApproved(t *testing.T) {
	t.Parallel()
	s := startApprovals(t, dispatch.Config{})
	ctx := t.Context()
	resp, err := s.Client.Call(ctx, connect.NewRequest(&toolwirev1.CallRequest{Tool: "wipe",
		ArgumentsJson: `{"path":"/srv","key":"hunter2-secret"}`, Session: "s1"}))
	require.NoError(t, err)
	id := resp.Msg.CallId
	require.Equal(t, toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, resp.Msg.State)
	req := requireParked(t, resp.Msg.Response, id)
	require.Empty(t, req.GetToken(), "no token keys: no token")
	require.Contains(t, resp.Msg.Response.Error.Message, "the tool requires approval")
	requireNothingQueued(t, s.Stack)

	g, err := s.Client.GetResult(ctx, connect.NewRequest(&toolwirev1.GetResultRequest{CallId: id}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, g.Msg.State)
	requireParked(t, g.Msg.Response, id)

	sub := s.submit(t, &toolwirev1.SubmitRequest{Tool: "wipe", ArgumentsJson: `{"path":"/var"}`})
	require.Equal(t, toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, sub.State)
	requireParked(t, sub.Response, sub.CallId)

	list, truncated, err := s.Dispatcher.Approvals().ListApprovals(ctx, approver, &toolwirev1.ListApprovalsRequest{
		State: toolwirev1.ApprovalState_APPROVAL_STATE_PENDING})
	require.NoError(t, err)
	require.False(t, truncated)
	require.Len(t, list, 2)
	require.Equal(t, sub.CallId, list[0].Id, "newest first")
	a := list[1]
	require.Equal(t, id, a.Id)
	require.Equal(t, "wipe", a.Tool)
	require.Equal(t, "s1", a.Caller.Session)
	require.NotContains(t, a.ArgumentsJson, "hunter2", "secret arguments are redacted for approvers")
	require.Contains(t, a.ArgumentsJson, "/srv")
	require.True(t, a.Decision.RequiresApproval)

	got, grant, err := s.Dispatcher.Approvals().Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: id, Reason: "looks fine"})
	require.NoError(t, err)
	require.Nil(t, grant)
	require.Equal(t, toolwirev1.ApprovalState_APPROVAL_STATE_APPROVED, got.State)
	require.Equal(t, "boss", got.Approver)
	r := waitResult(t, s.Stack, id)
	require.True(t, r.Ok, "%v", r.Error)
	require.Equal(t, 1, s.l.count(id))

	_, _, err = s.Dispatcher.Approvals().Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: id})
	require.ErrorIs(t, err, approvalflow.ErrApprovalDecided, "approved once")
	_, err = s.Dispatcher.Approvals().Deny(ctx, approver, id, "too late")
	require.ErrorIs(t, err, approvalflow.ErrApprovalDecided)
	types := events(t, s.Stack, id)
	require.Equal(t, toolwirev1.CallEventType_CALL_EVENT_TYPE_AWAITING_APPROVAL, types[0])
	require.Equal(t, toolwirev1.CallEventType_CALL_EVENT_TYPE_APPROVED, types[1])
	require.Contains(t, types, toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED)
	require.Equal(t, toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED, types[len(types)-1])
	require.Equal(t, 1, s.l.count(id))
	require.Zero(t, s.l.count(sub.CallId), "the other one still waits")

	// Validation still comes first: invalid arguments are VALIDATION.
	v := call(t, s.Client, &toolwirev1.CallRequest{Tool: "wipe", ArgumentsJson: `{"path":1}`})
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, v.Response.Error.Type)
}

// Approving and denying need the approve scope, and see the caller's
// tenant only.
func TestApprovalsNeedTheApproveScope(t *testing.T) {
	t.Parallel()
	s := startApprovals(t, dispatch.Config{})
	ctx := t.Context()
	sub := s.submit(t, &toolwirev1.SubmitRequest{Tool: "wipe", ArgumentsJson: `{"path":"/"}`})
	caller := identity.Identity{Tenant: "default", Agent: "bot", Scopes: []string{"tools"}}
	_, _, err := s.Dispatcher.Approvals().Approve(ctx, caller, &toolwirev1.ApproveRequest{Id: sub.CallId})
	require.ErrorIs(t, err, approvalflow.ErrNeedApproveScope)
	_, err = s.Dispatcher.Approvals().Deny(ctx, caller, sub.CallId, "no")
	require.ErrorIs(t, err, approvalflow.ErrNeedApproveScope)
	_, _, err = s.Dispatcher.Approvals().ListApprovals(ctx, caller, &toolwirev1.ListApprovalsRequest{})
	require.ErrorIs(t, err, approvalflow.ErrNeedApproveScope)
	_, err = s.Dispatcher.Approvals().GetApproval(ctx, caller, sub.CallId)
	require.ErrorIs(t, err, approvalflow.ErrNeedApproveScope)

	stranger := identity.Identity{Tenant: "other", Agent: "boss", Scopes: []string{approvalflow.ApproveScope}}
	_, _, err = s.Dispatcher.Approvals().Approve(ctx, stranger, &toolwirev1.ApproveRequest{Id: sub.CallId})
	require.ErrorIs(t, err, approvalflow.ErrUnknownApproval, "another tenant's approval does not exist for it")
	list, _, err := s.Dispatcher.Approvals().ListApprovals(ctx, stranger, &toolwirev1.ListApprovalsRequest{})
	require.NoError(t, err)
	require.Empty(t, list)

	// Through the API: the codes.
	_, err = s.Client.Approve(ctx, connect.NewRequest(&toolwirev1.ApproveRequest{Id: "01J00000000000000000000C99"}))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err))
	_, err = s.Client.Deny(ctx, connect.NewRequest(&toolwirev1.DenyRequest{Id: sub.CallId}))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "a denial needs a reason")
	_, err = s.Client.Approve(ctx, connect.NewRequest(&toolwirev1.ApproveRequest{Id: sub.CallId, Tool: "x*"}))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "a tool glob without a grant scope")
	g, err := s.Client.GetApproval(ctx, connect.NewRequest(&toolwirev1.GetApprovalRequest{Id: sub.CallId}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ApprovalState_APPROVAL_STATE_PENDING, g.Msg.Approval.State)
	require.Zero(t, s.l.total())
}

// Deny: the caller — also one waiting in Call with wait_for_approval on
// another replica — gets PERMISSION_DENIED with the approver's reason;
// GetResult, Watch and the events say so; the tool never ran.
func TestDenyAnswersPermissionDenied(t *testing.T) {
	t.Parallel()
	s := startApprovals(t, dispatch.Config{})
	other := s.StartDispatcher(t, dispatch.Config{})
	ctx := t.Context()
	type answer struct {
		r   *toolwirev1.CallResponse
		err error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := other.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "wipe", ArgumentsJson: `{"path":"/"}`,
			WaitForApproval: true}, time.Minute)
		done <- answer{r, err}
	}()
	var id string
	require.Eventually(t, func() bool {
		list, _, err := s.Dispatcher.Approvals().ListApprovals(ctx, approver, &toolwirev1.ListApprovalsRequest{})
		if err != nil || len(list) == 0 {
			return false
		}
		id = list[0].Id
		return true
	}, 10*time.Second, 10*time.Millisecond)
	a, err := s.Dispatcher.Approvals().Deny(ctx, approver, id, "not on a Friday")
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ApprovalState_APPROVAL_STATE_DENIED, a.State)
	var got answer
	select {
	case got = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the waiting caller was never answered")
	}
	require.NoError(t, got.err)
	require.Equal(t, id, got.r.CallId)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, got.r.State)
	e := got.r.Response.Error
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, e.Type)
	require.Contains(t, e.Message, "not on a Friday")
	require.False(t, e.Retryable)
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, e.PartialSideEffects)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, waitResult(t, s.Stack, id).Error.Type)
	require.Contains(t, events(t, s.Stack, id), toolwirev1.CallEventType_CALL_EVENT_TYPE_APPROVAL_DENIED)
	_, _, err = s.Dispatcher.Approvals().Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: id})
	require.ErrorIs(t, err, approvalflow.ErrApprovalDecided)
	require.Zero(t, s.l.total())
	requireNothingQueued(t, s.Stack)
}

// Unanswered approvals expire: the caller gets EXPIRED, the events say
// APPROVAL_EXPIRED, and an approval comes too late. One replica of two
// expires it (both sweep).
func TestUnansweredApprovalsExpire(t *testing.T) {
	t.Parallel()
	cfg := dispatch.Config{ApprovalTTL: time.Second, ApprovalSweep: 50 * time.Millisecond}
	s := startApprovals(t, cfg)
	s.StartDispatcher(t, cfg)
	ctx := t.Context()
	resp, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "wipe", ArgumentsJson: `{"path":"/"}`,
		WaitForApproval: true}, time.Minute)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, resp.State)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_EXPIRED, resp.Response.Error.Type, resp.Response.Error.Message)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_EXPIRED, waitResult(t, s.Stack, resp.CallId).Error.Type)
	types := events(t, s.Stack, resp.CallId)
	expired := 0
	for _, ty := range types {
		if ty == toolwirev1.CallEventType_CALL_EVENT_TYPE_APPROVAL_EXPIRED {
			expired++
		}
	}
	require.Equal(t, 1, expired, "one expiry recorded: %v", types)
	_, _, err = s.Dispatcher.Approvals().Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: resp.CallId})
	require.ErrorIs(t, err, approvalflow.ErrApprovalDecided)
	a, err := s.Dispatcher.Approvals().GetApproval(ctx, approver, resp.CallId)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ApprovalState_APPROVAL_STATE_EXPIRED, a.State)
	require.Zero(t, s.l.total())
}

// Call with wait_for_approval keeps waiting and returns the result once
// another replica approved and ran the call; without it a Call answers at
// once, and a wait that ends first says AWAITING_APPROVAL, not PENDING.
func TestCallWaitsForApprovalWhenAsked(t *testing.T) {
	t.Parallel()
	s := startApprovals(t, dispatch.Config{})
	other := s.StartDispatcher(t, dispatch.Config{})
	ctx := t.Context()
	short, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "wipe", ArgumentsJson: `{"path":"/a"}`,
		WaitForApproval: true}, 100*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, short.State)
	requireParked(t, short.Response, short.CallId)

	done := make(chan *toolwirev1.CallResponse, 1)
	go func() {
		r, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "wipe", ArgumentsJson: `{"path":"/b"}`,
			WaitForApproval: true, IdempotencyKey: "k1"}, time.Minute)
		if err != nil {
			r = nil
		}
		done <- r
	}()
	var id string
	require.Eventually(t, func() bool {
		list, _, err := other.Approvals().ListApprovals(ctx, approver, &toolwirev1.ListApprovalsRequest{Limit: 1})
		if err != nil || len(list) == 0 || list[0].Id == short.CallId {
			return false
		}
		id = list[0].Id
		return true
	}, 10*time.Second, 10*time.Millisecond)
	// A repeat of the idempotency key is the same parked call.
	dup, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "wipe", ArgumentsJson: `{"path":"/b"}`,
		IdempotencyKey: "k1"}, time.Minute)
	require.NoError(t, err)
	require.Equal(t, id, dup.CallId)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, dup.State)

	_, _, err = other.Approvals().Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: id})
	require.NoError(t, err)
	var r *toolwirev1.CallResponse
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the waiting caller was never answered")
	}
	require.NotNil(t, r)
	require.Equal(t, id, r.CallId)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State)
	require.True(t, r.Response.Ok, "%v", r.Response.Error)
	require.Equal(t, "done /b", r.Response.Content[0].GetText().GetText())
	require.Equal(t, 1, s.l.count(id))
}

// Approvers racing on two replicas: exactly one approval wins and the
// call runs exactly once (the ledger), the others are told it was
// decided.
func TestRacingApprovalsRunOnce(t *testing.T) {
	t.Parallel()
	s := startApprovals(t, dispatch.Config{})
	replicas := []*dispatch.Dispatcher{s.Dispatcher, s.StartDispatcher(t, dispatch.Config{})}
	ctx := t.Context()
	const calls, racers = 5, 6
	var ids []string
	for i := range calls {
		ids = append(ids, s.submit(t, &toolwirev1.SubmitRequest{Tool: "wipe", ArgumentsJson: fmt.Sprintf(`{"path":"/%d"}`, i)}).CallId)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := map[string]int{}
	for _, id := range ids {
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, err := replicas[i%2].Approvals().Approve(ctx, identity.Identity{Tenant: "default", Agent: fmt.Sprint("boss", i),
					Scopes: []string{approvalflow.ApproveScope}}, &toolwirev1.ApproveRequest{Id: id})
				if err == nil {
					mu.Lock()
					wins[id]++
					mu.Unlock()
				} else if !strings.Contains(err.Error(), "already decided") {
					t.Errorf("approve %s: %v", id, err)
				}
			}()
		}
	}
	wg.Wait()
	for _, id := range ids {
		require.Equal(t, 1, wins[id], id)
		require.True(t, waitResult(t, s.Stack, id).Ok)
		require.Equal(t, 1, s.l.count(id), id)
	}
	require.Equal(t, calls, s.l.total())
}

// A call approved on another replica than the one that parked it has
// its ACCEPTED record on the events subject of its own dispatcher (the
// parking one's, ToolCall.dispatcher), where its AWAITING_APPROVAL
// record and its workers' events are and whose name its result's
// subject carries: the overdue sweeper answers a call on the result
// subject of the replica its ACCEPTED record names (before, the record
// named the approver, and an overdue approved call's answer went where
// no reader of the call looked).
func TestAnApprovedCallsAdmissionRecordIsItsDispatchers(t *testing.T) {
	t.Parallel()
	s := startApprovals(t, dispatch.Config{})
	other := s.StartDispatcher(t, dispatch.Config{})
	id := s.submit(t, &toolwirev1.SubmitRequest{Tool: "wipe", ArgumentsJson: `{"path":"/x"}`}).CallId
	_, _, err := other.Approvals().Approve(t.Context(), identity.Identity{Tenant: "default", Agent: "boss",
		Scopes: []string{approvalflow.ApproveScope}}, &toolwirev1.ApproveRequest{Id: id})
	require.NoError(t, err)
	require.True(t, waitResult(t, s.Stack, id).Ok)

	on := eventDispatchers(t, s.Stack, id, toolwirev1.CallEventType_CALL_EVENT_TYPE_AWAITING_APPROVAL,
		toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED, toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED)
	parked, accepted, started := on[toolwirev1.CallEventType_CALL_EVENT_TYPE_AWAITING_APPROVAL],
		on[toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED], on[toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED]
	require.Equal(t, parked[0], accepted[0], "the ACCEPTED record is on the parking replica's subject")
	require.Equal(t, started[0], accepted[0], "where the workers' events are")

	// The audit shows the call's whole record, the approver's APPROVED
	// event (on the approving replica's subject) too.
	src, err := audit.Open(t.Context(), s.Env.Bus.NC, s.Env.Bus.Config.Prefix)
	require.NoError(t, err)
	var rec *audit.Record
	_, err = src.Run(t.Context(), audit.Filter{CallID: id}, audit.Options{Events: true}, func(x *audit.Record) error { rec = x; return nil })
	require.NoError(t, err)
	require.NotNil(t, rec)
	require.Contains(t, auditedEvents(t, rec), "CALL_EVENT_TYPE_APPROVED")
	require.Contains(t, auditedEvents(t, rec), "CALL_EVENT_TYPE_AWAITING_APPROVAL")
}

// auditedEvents are the types of the events an audit record shows.
func auditedEvents(t *testing.T, rec *audit.Record) []string {
	t.Helper()
	var out []string
	for _, raw := range rec.Events {
		ev := &toolwirev1.CallEvent{}
		require.NoError(t, protojson.Unmarshal(raw, ev))
		out = append(out, ev.Type.String())
	}
	return out
}

// eventDispatchers waits (at most 20 s) until callID has exactly one
// stored event of each of the types given and returns, by type, the
// dispatcher token of the events subject each of its events is stored on
// (<prefix>.event.<tenant>.<dispatcher>.<call_id>).
func eventDispatchers(t *testing.T, s *dispatchtest.Stack, callID string, types ...toolwirev1.CallEventType) map[toolwirev1.CallEventType][]string {
	t.Helper()
	b := s.Env.Bus
	var on map[toolwirev1.CallEventType][]string
	require.Eventually(t, func() bool {
		msgs, err := bus.AllMsgsFromLeader(t.Context(), b.JS, b.Events, b.Subjects.EventsAnyDispatcher(identity.Default.Tenant, callID))
		if err != nil {
			return false
		}
		on = map[toolwirev1.CallEventType][]string{}
		for _, m := range msgs {
			ev := &toolwirev1.CallEvent{}
			if proto.Unmarshal(m.Data, ev) == nil {
				on[ev.Type] = append(on[ev.Type], strings.Split(m.Subject, ".")[3])
			}
		}
		for _, typ := range types {
			if len(on[typ]) != 1 {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond, "one event of each of %v", types)
	return on
}

// A replica that stops right after its decision (the compare-and-set),
// before the publish, loses nothing: the sweep of a replica publishes the
// approved call within seconds, and it runs once.
func TestApprovedButUnpublishedCallsArePublishedBySweep(t *testing.T) {
	t.Parallel()
	s := startApprovals(t, dispatch.Config{ApprovalSweep: 100 * time.Millisecond})
	ctx := t.Context()
	id := s.submit(t, &toolwirev1.SubmitRequest{Tool: "wipe", ArgumentsJson: `{"path":"/"}`}).CallId
	dispatch.StopAfterNextApprovals(s.Dispatcher, 1)
	_, _, err := s.Dispatcher.Approvals().Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: id})
	require.NoError(t, err)
	require.True(t, waitResult(t, s.Stack, id).Ok)
	require.Equal(t, 1, s.l.count(id))
	types := events(t, s.Stack, id)
	approved := 0
	for _, ty := range types {
		if ty == toolwirev1.CallEventType_CALL_EVENT_TYPE_APPROVED {
			approved++
		}
	}
	require.Equal(t, 1, approved, "%v", types)
}

// An approved call left unpublished past the calls stream's duplicate
// window is never published blind (it could run twice): it is answered
// UNKNOWN_OUTCOME.
func TestUnpublishedPastTheDuplicateWindowIsUnknownOutcome(t *testing.T) {
	t.Parallel()
	l := &ledger{runs: map[string]int{}}
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{l.tool("wipe", tool.RequiresApproval())},
		Bus:        busWithWindow(2 * time.Second),
		Dispatcher: dispatch.Config{ApprovalSweep: 100 * time.Millisecond, PublishHorizon: time.Second}})
	ctx := t.Context()
	sub, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "wipe", ArgumentsJson: `{"path":"/"}`})
	require.NoError(t, err)
	dispatch.StopAfterNextApprovals(s.Dispatcher, 1000)
	_, _, err = s.Dispatcher.Approvals().Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: sub.CallID})
	require.NoError(t, err)
	r := waitResult(t, s, sub.CallID)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_UNKNOWN_OUTCOME, r.Error.Type, r.Error.Message)
	require.Zero(t, l.total())
}

func busWithWindow(d time.Duration) bus.Config { return bus.Config{DuplicateWindow: d} }

// Cancelling a parked call ends it at once: CANCELLED (nothing ran), its
// approval denied by the cancelling agent, and an approver comes too late.
func TestCancelEndsAParkedCall(t *testing.T) {
	t.Parallel()
	s := startApprovals(t, dispatch.Config{})
	ctx := t.Context()
	id := s.submit(t, &toolwirev1.SubmitRequest{Tool: "wipe", ArgumentsJson: `{"path":"/"}`}).CallId
	out, err := s.Dispatcher.Cancel(ctx, identity.Default, id, "changed my mind")
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_REQUESTED, out)
	r := waitResult(t, s.Stack, id)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, r.Error.Type, r.Error.Message)
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, r.Error.PartialSideEffects)
	a, err := s.Dispatcher.Approvals().GetApproval(ctx, approver, id)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ApprovalState_APPROVAL_STATE_DENIED, a.State)
	require.Equal(t, "cancelled by its caller: changed my mind", a.Reason)
	_, _, err = s.Dispatcher.Approvals().Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: id})
	require.ErrorIs(t, err, approvalflow.ErrApprovalDecided)
	require.Zero(t, s.l.total())
}
