package mcpserver_test

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/mcpserver"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// An ask of the policy, for a caller that may confirm its own calls, is
// put to the client's user as an elicitation showing the call: approved,
// the exact call runs; declined, the parked call is cancelled and nothing
// runs. A client that cannot elicit waits for an approver instead.
func TestAskConfirmedByTheClientsUser(t *testing.T) {
	t.Parallel()
	keys, err := approvals.ParseKeys([]byte("k1:" + base64.StdEncoding.EncodeToString(make([]byte, 32))))
	require.NoError(t, err)
	ran := make(chan string, 4)
	transfer := tool.Must(tool.New("transfer", func(_ context.Context, in struct {
		To  string `json:"to"`
		PIN string `json:"pin,omitempty" toolwire:"secret"`
	}) (string, error) {
		ran <- in.To
		return "sent to " + in.To, nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), transfer),
		Dispatcher: dispatch.Config{TokenKeys: keys}})
	a, err := policystore.NewStore(s.Env.Bus, nil).Apply(t.Context(), policystore.Installation,
		[]byte("tenant:\n  default: allow\n  rules:\n    - {id: ask-transfer, effect: ask, tools: [transfer]}\n"), policystore.ApplyOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Policies.Wait(t.Context(), policystore.Installation, a.Version.Version, a.Revision))
	url := endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default}) // every scope: confirm too
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	user := func(approve bool) *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
			ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				require.Contains(t, r.Params.Message, `"to":"bob"`, "the user sees the exact call")
				require.NotContains(t, r.Params.Message, "9876-secret", "but not its secrets")
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": approve}}, nil
			}})
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	res, err := user(true).CallTool(ctx, &mcp.CallToolParams{Name: "transfer", Arguments: map[string]any{"to": "bob", "pin": "9876-secret"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v %v", res.Content[0].(*mcp.TextContent).Text, res.Meta)
	require.Equal(t, "sent to bob", res.Content[0].(*mcp.TextContent).Text)
	require.Equal(t, "bob", <-ran)

	res, err = user(false).CallTool(ctx, &mcp.CallToolParams{Name: "transfer", Arguments: map[string]any{"to": "bob"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	id := res.Meta[mcpserver.MetaCallID].(string)
	g, err := s.Dispatcher.GetResult(ctx, identity.Default, id, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, g.State)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, g.Response.GetError().GetType(), "the declined call is cancelled")
	select {
	case to := <-ran:
		t.Fatalf("a declined call ran (to %s)", to)
	default:
	}

	// A client that cannot elicit: the call waits for an approver.
	plain := connect(t, url, "any", "2026-07-28")
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := plain.CallTool(ctx, &mcp.CallToolParams{Name: "transfer", Arguments: map[string]any{"to": "carol"}})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
	var pending []*toolwirev1.Approval
	require.Eventually(t, func() bool {
		pending, _, err = s.Dispatcher.Approvals().ListApprovals(ctx, identity.Default, &toolwirev1.ListApprovalsRequest{
			State: toolwirev1.ApprovalState_APPROVAL_STATE_PENDING, Tool: "transfer"})
		return err == nil && len(pending) == 1
	}, 30*time.Second, 20*time.Millisecond)
	_, _, err = s.Dispatcher.Approvals().Approve(ctx, identity.Default, &toolwirev1.ApproveRequest{Id: pending[0].GetId()})
	require.NoError(t, err)
	res = <-done
	require.False(t, res.IsError, "%v", res.Content)
	require.Equal(t, "carol", <-ran)
}
