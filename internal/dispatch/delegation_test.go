package dispatch_test

import (
	"context"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// holdTool runs until its call is cancelled (or the test ends): a parent
// or a sub-agent's call that is still running.
func holdTool(name string) *tool.Tool {
	return tool.Must(tool.New(name, func(ctx context.Context, _ struct{}) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}))
}

// releasedTool is a tool name that runs until release is closed
// (answering "released") or its call is cancelled.
func releasedTool(name string, release <-chan struct{}) *tool.Tool {
	return tool.Must(tool.New(name, func(ctx context.Context, _ struct{}) (string, error) {
		select {
		case <-release:
			return "released", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}))
}

// delegationStack runs hold (runs until cancelled) and echo on a pool of
// 16 slots, under cfg.
func delegationStack(t *testing.T, cfg dispatch.Config) *dispatchtest.Stack {
	t.Helper()
	echo := tool.Must(tool.New("echo", func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		return in.Text, nil
	}))
	return dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{holdTool("hold"), echo}, Concurrency: 16, Dispatcher: cfg})
}

// submitChild submits a hold call on behalf of parent through d.
func submitChild(t *testing.T, d *dispatch.Dispatcher, id identity.Identity, tool, parent string) *dispatch.Submitted {
	t.Helper()
	s, err := d.Submit(t.Context(), id, &toolwirev1.CallRequest{Tool: tool, ArgumentsJson: `{}`, ParentCallId: parent})
	require.NoError(t, err)
	return s
}

// Cancelling a call cancels the calls made on its behalf, and theirs,
// whichever replica admitted them: each ends CANCELLED.
func TestCancellingAParentCancelsItsDescendants(t *testing.T) {
	t.Parallel()
	s := delegationStack(t, dispatch.Config{})
	other := s.StartDispatcher(t, dispatch.Config{}) // a second replica
	root := submitChild(t, s.Dispatcher, identity.Default, "hold", "")
	require.Nil(t, root.Rejected)
	child := submitChild(t, other, identity.Default, "hold", root.CallID)
	require.Nil(t, child.Rejected, "%v", child.Rejected.GetError())
	sibling := submitChild(t, s.Dispatcher, identity.Default, "hold", root.CallID)
	require.Nil(t, sibling.Rejected, "%v", sibling.Rejected.GetError())
	grandchild := submitChild(t, s.Dispatcher, identity.Default, "hold", child.CallID)
	require.Nil(t, grandchild.Rejected, "%v", grandchild.Rejected.GetError())
	// An unrelated call is left alone.
	bystander := submitChild(t, other, identity.Default, "hold", "")

	out, err := s.Dispatcher.Cancel(t.Context(), identity.Default, root.CallID, "user stopped it")
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_REQUESTED, out)
	for _, id := range []string{root.CallID, child.CallID, sibling.CallID, grandchild.CallID} {
		r := waitResult(t, s, id)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, r.GetError().GetType(), "call %s: %v", id, r.GetError())
	}
	r, err := s.Dispatcher.GetResult(t.Context(), identity.Default, bystander.CallID, 0)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_PENDING, r.State, "an unrelated call is not cancelled")

	// A cancelled (or finished) parent takes no more children.
	late := submitChild(t, other, identity.Default, "hold", root.CallID)
	require.NotNil(t, late.Rejected)
	require.Contains(t, []toolwirev1.ErrorType{toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, toolwirev1.ErrorType_ERROR_TYPE_CONFLICT},
		late.Rejected.GetError().GetType(), late.Rejected.GetError().GetMessage())
	_, err = s.Dispatcher.Cancel(t.Context(), identity.Default, bystander.CallID, "")
	require.NoError(t, err)
}

// A parent must be a running call of the caller's own tenant: another
// tenant's call answers exactly as a made-up id, a finished one is a
// CONFLICT, and nothing is queued for either.
func TestAParentMustBeARunningCallOfTheTenant(t *testing.T) {
	t.Parallel()
	s := delegationStack(t, dispatch.Config{})
	ctx := t.Context()
	otherTenant := identity.Identity{Tenant: "other", Agent: "x", Scopes: []string{"*"}}
	theirs := submitChild(t, s.Dispatcher, otherTenant, "hold", "")
	require.Nil(t, theirs.Rejected)
	t.Cleanup(func() { _, _ = s.Dispatcher.Cancel(context.Background(), otherTenant, theirs.CallID, "") })

	made := "01J00000000000000000000000"
	for _, parent := range []string{theirs.CallID, made, "not-an-id"} {
		r := submitChild(t, s.Dispatcher, identity.Default, "hold", parent)
		require.NotNil(t, r.Rejected, parent)
		te := r.Rejected.GetError()
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, te.GetType(), parent)
		require.Equal(t, "parent call "+parent+" not found", te.GetMessage(), "no oracle: the same answer as a made-up id")
	}

	done, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"hi"}`}, 20*time.Second)
	require.NoError(t, err)
	require.True(t, done.Response.GetOk())
	r := submitChild(t, s.Dispatcher, identity.Default, "hold", done.CallId)
	require.NotNil(t, r.Rejected)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CONFLICT, r.Rejected.GetError().GetType(), r.Rejected.GetError().GetMessage())
}

// Depth and fan-out are bounded; a refused child does not count toward
// its parent's fan-out.
func TestDelegationDepthAndFanOutAreBounded(t *testing.T) {
	t.Parallel()
	s := delegationStack(t, dispatch.Config{MaxDelegationDepth: 2, MaxDelegationFanOut: 2})
	ctx := t.Context()
	root := submitChild(t, s.Dispatcher, identity.Default, "hold", "")
	t.Cleanup(func() { _, _ = s.Dispatcher.Cancel(context.Background(), identity.Default, root.CallID, "") })
	c1 := submitChild(t, s.Dispatcher, identity.Default, "hold", root.CallID)
	require.Nil(t, c1.Rejected, "%v", c1.Rejected.GetError())
	c2 := submitChild(t, s.Dispatcher, identity.Default, "hold", c1.CallID)
	require.Nil(t, c2.Rejected, "depth 2 is within the bound: %v", c2.Rejected.GetError())
	c3 := submitChild(t, s.Dispatcher, identity.Default, "hold", c2.CallID)
	require.NotNil(t, c3.Rejected, "depth 3 is past it")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, c3.Rejected.GetError().GetType())
	require.Contains(t, c3.Rejected.GetError().GetMessage(), "delegation too deep")

	// Fan-out: root has c1; a refused child (unknown tool) takes no place.
	bad := submitChild(t, s.Dispatcher, identity.Default, "nope", root.CallID)
	require.NotNil(t, bad.Rejected)
	second := submitChild(t, s.Dispatcher, identity.Default, "hold", root.CallID)
	require.Nil(t, second.Rejected, "%v", second.Rejected.GetError())
	third := submitChild(t, s.Dispatcher, identity.Default, "hold", root.CallID)
	require.NotNil(t, third.Rejected)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, third.Rejected.GetError().GetType())
	require.Contains(t, third.Rejected.GetError().GetMessage(), "bound of 2 delegated calls")

	// The refusal is recorded: any replica answers the id with it.
	r, err := s.Dispatcher.GetResult(ctx, identity.Default, third.CallID, 0)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.Response.GetError().GetType())
}

// docsDelegationYAML returns the YAML examples of docs/delegation.md: the
// scoped policy, then the budget per chain.
func docsDelegationYAML(t *testing.T) [][][]byte {
	t.Helper()
	src, err := os.ReadFile("../../docs/delegation.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(src, -1)
	require.Len(t, blocks, 2)
	return blocks
}

// The example of docs/delegation.md is a policy that admits and refuses a
// sub-agent's calls as the page says.
func TestDocsDelegationExample(t *testing.T) {
	t.Parallel()
	blocks := docsDelegationYAML(t)
	plain := func(name string) *tool.Tool {
		return tool.Must(tool.New(name, func(context.Context, struct{}) (string, error) { return name + " done", nil }))
	}
	s := dispatchtest.Start(t, dispatchtest.Options{Concurrency: 8, Tools: []*tool.Tool{
		holdTool("researcher"), holdTool("planner"), plain("search"), plain("send_email")}})
	s.ApplyPolicy(t, string(blocks[0][1]))
	ctx := t.Context()
	call := func(tool, parent string) *toolwirev1.ToolResponse {
		t.Helper()
		r, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: tool, ArgumentsJson: `{}`, ParentCallId: parent}, 20*time.Second)
		require.NoError(t, err)
		require.NotNil(t, r.Response, "%s answered", tool)
		return r.Response
	}
	researcher := submitChild(t, s.Dispatcher, identity.Default, "researcher", "")
	t.Cleanup(func() { _, _ = s.Dispatcher.Cancel(context.Background(), identity.Default, researcher.CallID, "") })

	require.True(t, call("search", researcher.CallID).GetOk(), "in the researcher's scope")
	out := call("send_email", researcher.CallID)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, out.GetError().GetType())
	require.Contains(t, out.GetError().GetMessage(), "outside the researcher scope")
	require.True(t, call("send_email", "").GetOk(), "a call made on nobody's behalf")

	// Three delegations deep (planner → planner → planner → send_email).
	p1 := submitChild(t, s.Dispatcher, identity.Default, "planner", "")
	t.Cleanup(func() { _, _ = s.Dispatcher.Cancel(context.Background(), identity.Default, p1.CallID, "") })
	p2 := submitChild(t, s.Dispatcher, identity.Default, "planner", p1.CallID)
	require.Nil(t, p2.Rejected)
	p3 := submitChild(t, s.Dispatcher, identity.Default, "planner", p2.CallID)
	require.Nil(t, p3.Rejected)
	require.True(t, call("send_email", p2.CallID).GetOk(), "depth 2 may send")
	deep := call("send_email", p3.CallID)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, deep.GetError().GetType())
	require.Contains(t, deep.GetError().GetMessage(), "three or more delegations deep")
}

// twoChains submits two hold calls at the top of their chains, a and b
// (cancelled when the test ends), and a hold call on a's behalf, sub: a
// sub-agent one level below a.
func twoChains(t *testing.T, s *dispatchtest.Stack) (a, b, sub *dispatch.Submitted) {
	t.Helper()
	a = submitChild(t, s.Dispatcher, identity.Default, "hold", "")
	b = submitChild(t, s.Dispatcher, identity.Default, "hold", "")
	t.Cleanup(func() {
		_, _ = s.Dispatcher.Cancel(context.Background(), identity.Default, a.CallID, "")
		_, _ = s.Dispatcher.Cancel(context.Background(), identity.Default, b.CallID, "")
	})
	sub = submitChild(t, s.Dispatcher, identity.Default, "hold", a.CallID)
	require.Nil(t, sub.Rejected)
	return a, b, sub
}

// callOnBehalf calls tool with args on behalf of parent ("" = none)
// through s's dispatcher and returns its answer.
func callOnBehalf(t *testing.T, s *dispatchtest.Stack, tool, args, parent string) *toolwirev1.ToolResponse {
	t.Helper()
	r, err := s.Dispatcher.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: tool, ArgumentsJson: args, ParentCallId: parent}, 20*time.Second)
	require.NoError(t, err)
	return r.Response
}

// With scope chain, the loop guard counts a delegated call in its chain:
// the same call repeated below one root is denied, below another root it
// is counted anew.
func TestLoopGuardCountsPerChain(t *testing.T) {
	t.Parallel()
	s := delegationStack(t, dispatch.Config{})
	s.ApplyPolicy(t, "loop_guard:\n  warn: 0\n  ask: 0\n  deny: 2\n  scope: chain\n  exempt: [hold]\n")
	echo := func(parent string) *toolwirev1.ToolResponse {
		t.Helper()
		return callOnBehalf(t, s, "echo", `{"text":"again"}`, parent)
	}
	a, b, sub := twoChains(t, s)
	require.True(t, echo(a.CallID).GetOk())
	denied := echo(sub.CallID) // the same chain, one level down
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, denied.GetError().GetType(), denied.GetError().GetMessage())
	require.Contains(t, denied.GetError().GetMessage(), "delegation chain")
	require.True(t, echo(b.CallID).GetOk(), "another chain counts anew")
}
