package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/mcpserver"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// taskClient speaks JSON-RPC of the 2026-07-28 revision to one endpoint,
// with a bearer key, declaring elicitation and the Tasks extension.
type taskClient struct {
	t        *testing.T
	url, key string
}

func (c taskClient) rpc(method string, params map[string]any) (result map[string]any, rpcErr *struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}) {
	c.t.Helper()
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{},
			"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	require.NoError(c.t, err)
	ctx, cancel := context.WithTimeout(c.t.Context(), 30*time.Second)
	defer cancel()
	out := postRPC(c.t, ctx, c.url, body, "Authorization", "Bearer "+c.key)
	var msg struct {
		Result map[string]any `json:"result"`
		Error  *struct {
			Code    int64           `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
	require.NoError(c.t, json.Unmarshal(out, &msg), string(out))
	return msg.Result, msg.Error
}

func (c taskClient) get(id string) map[string]any {
	c.t.Helper()
	r, e := c.rpc("tasks/get", map[string]any{"taskId": id})
	require.Nil(c.t, e)
	require.Equal(c.t, id, r["taskId"])
	return r
}

// until polls tasks/get until the task's status is want.
func (c taskClient) until(id, want string) map[string]any {
	c.t.Helper()
	var last map[string]any
	require.Eventually(c.t, func() bool {
		last = c.get(id)
		return last["status"] == want
	}, 30*time.Second, 50*time.Millisecond, "task %s never %s", id, want)
	return last
}

// twoTenantKeys authenticates key "a" as tenant acme and "b" as tenant
// other, both with every scope.
func twoTenantKeys(t *testing.T) *identity.APIKeys {
	t.Helper()
	return keyring(t, keyOf{"a", "acme", []string{"*"}}, keyOf{"b", "other", []string{"*"}})
}

// A long call of a client that declared the Tasks extension is a task:
// created on one replica, polled, answered and cancelled on the other;
// a call parked for approval is a task that completes once approved; a
// tool that asks for input inside a task takes the answers by
// tasks/update. Another tenant cannot see the task.
func TestTasksAcrossReplicas(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	cancelled := make(chan error, 1)
	hold := tool.Must(tool.New("hold", func(ctx context.Context, in struct {
		Cancel bool `json:"cancel,omitempty"`
	}) (string, error) {
		if in.Cancel {
			<-ctx.Done()
			cancelled <- context.Cause(ctx)
			return "", ctx.Err()
		}
		select {
		case <-release:
			return "released", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}))
	askLater := tool.Must(tool.New("ask_later", func(ctx context.Context, _ struct{}) (*tool.Result, error) {
		if a := tool.InputFrom(ctx); a != nil && a.PreviousCallID != "" {
			var who struct{ Name string }
			if ok, err := a.Elicited("who", &who); err == nil && ok {
				return &tool.Result{Content: []*toolwirev1.Content{tool.Text("hi " + who.Name)}}, nil
			}
		}
		<-release
		return tool.NeedInput(map[string]tool.InputRequest{"who": tool.Elicit("Who?", map[string]any{"type": "object",
			"properties": map[string]any{"name": map[string]any{"type": "string"}}})}, nil), nil
	}))
	deploy := tool.Must(tool.New("deploy", func(context.Context, struct{}) (string, error) { return "deployed", nil }))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), hold, askLater, deploy),
		Auth: twoTenantKeys(t)})
	a, err := policystore.NewStore(s.Env.Bus, nil).Apply(t.Context(), policystore.Installation,
		[]byte("tenant:\n  default: allow\n  rules:\n    - {id: ask-deploy, effect: ask, tools: [deploy]}\n"), policystore.ApplyOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Policies.Wait(t.Context(), policystore.Installation, a.Version.Version, a.Revision))
	other := s.StartDispatcher(t, dispatch.Config{})
	serve := func(d *dispatch.Dispatcher) string {
		mux := http.NewServeMux()
		ms, err := mcpserver.New(d, twoTenantKeys(t), mcpserver.Config{TaskAfter: 200 * time.Millisecond, Tasks: d.Tasks()})
		require.NoError(t, err)
		ms.Handle(mux)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return srv.URL + mcpserver.Path
	}
	one, two := taskClient{t, serve(s.Dispatcher), "a"}, taskClient{t, serve(other), "a"}
	stranger := taskClient{t, two.url, "b"}

	created, e := one.rpc("tools/call", map[string]any{"name": "hold", "arguments": map[string]any{}})
	require.Nil(t, e)
	require.Equal(t, "task", created["resultType"])
	require.Equal(t, "working", created["status"])
	id := created["taskId"].(string)
	require.Equal(t, "working", two.get(id)["status"], "the other replica answers at once")
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		_, e = stranger.rpc(m, map[string]any{"taskId": id, "inputResponses": map[string]any{}})
		require.NotNil(t, e, m)
		require.EqualValues(t, -32602, e.Code, "another tenant's task is unknown to %s", m)
	}

	// A task waiting for input, answered on the other replica.
	asking, e := one.rpc("tools/call", map[string]any{"name": "ask_later", "arguments": map[string]any{}})
	require.Nil(t, e)
	askID := asking["taskId"].(string)
	// An answer to nothing asked yet is ignored (acknowledged, not kept).
	ack, e := two.rpc("tasks/update", map[string]any{"taskId": askID,
		"inputResponses": map[string]any{"1.who": map[string]any{"action": "accept", "content": map[string]any{"name": "Early"}}}})
	require.Nil(t, e)
	require.Equal(t, map[string]any{"resultType": "complete"}, ack)
	close(release)
	done := two.until(id, "completed")
	require.Equal(t, "released", done["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"])
	waiting := two.until(askID, "input_required")
	require.Contains(t, waiting["inputRequests"], "1.who", "keys are of their round")
	require.Equal(t, "input_required", one.get(askID)["status"], "the early answer was not taken")
	ack, e = two.rpc("tasks/update", map[string]any{"taskId": askID,
		"inputResponses": map[string]any{"1.who": map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}}})
	require.Nil(t, e)
	require.Equal(t, map[string]any{"resultType": "complete"}, ack)
	answered := one.until(askID, "completed")
	require.Equal(t, "hi Ada", answered["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"])

	// Cancelled from the other replica: the cancel reaches the worker.
	created, e = one.rpc("tools/call", map[string]any{"name": "hold", "arguments": map[string]any{"cancel": true}})
	require.Nil(t, e)
	id = created["taskId"].(string)
	ack, e = two.rpc("tasks/cancel", map[string]any{"taskId": id})
	require.Nil(t, e)
	require.Equal(t, map[string]any{"resultType": "complete"}, ack)
	select {
	case cause := <-cancelled:
		require.ErrorContains(t, cause, "tasks/cancel")
	case <-time.After(30 * time.Second):
		t.Fatal("the cancel did not reach the worker")
	}
	one.until(id, "cancelled")

	// An ask of the policy: a task waiting for a person, done once approved.
	created, e = one.rpc("tools/call", map[string]any{"name": "deploy", "arguments": map[string]any{}})
	require.Nil(t, e)
	require.Equal(t, "task", created["resultType"])
	id = created["taskId"].(string)
	require.Contains(t, two.get(id)["statusMessage"], "approval")
	approver := identity.Identity{Tenant: "acme", Agent: "ops", Scopes: []string{"*"}}
	_, _, err = other.Approvals().Approve(t.Context(), approver, &toolwirev1.ApproveRequest{Id: id})
	require.NoError(t, err)
	require.Equal(t, "deployed", two.until(id, "completed")["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"])
}
