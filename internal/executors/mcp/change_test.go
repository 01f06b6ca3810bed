package mcp_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/mcp"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

const mcpType = toolwirev1.ExecutorType_EXECUTOR_TYPE_MCP

// call calls name through the stack's API and waits for the response.
func call(t *testing.T, s *dispatchtest.Stack, name, args string) *toolwirev1.ToolResponse {
	t.Helper()
	resp, err := s.Client.Call(t.Context(), connect.NewRequest(&toolwirev1.CallRequest{
		Tool: name, ArgumentsJson: args, Wait: durationpb.New(30 * time.Second)}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, resp.Msg.State, "call of %s did not finish", name)
	return resp.Msg.Response
}

// waitSpec polls the registry until name's current spec satisfies ok.
func waitSpec(t *testing.T, s *dispatchtest.Stack, name string, ok func(*toolwirev1.ToolSpec) bool) *toolwirev1.ToolSpec {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if ent, err := s.Registry.Get(name); err == nil && ok(ent.Spec) {
			return ent.Spec
		}
		if time.Now().After(deadline) {
			ent, _ := s.Registry.Get(name)
			t.Fatalf("spec of %s never reached the expected state; last: %v", name, ent)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

// execute runs name through the executor directly, as a worker would with
// spec.
func execute(e *mcp.Executor, spec *toolwirev1.ToolSpec, args string) (*tool.Result, error) {
	return e.Execute(context.Background(), &executors.Request{
		Call: &toolwirev1.ToolCall{CallId: "direct", Tool: spec.GetName(), Arguments: []byte(args), Attempt: 1},
		Spec: spec,
	})
}

func errorType(t *testing.T, err error) toolwirev1.ErrorType {
	t.Helper()
	require.Error(t, err)
	te := tool.AsError(context.Background(), err)
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, te.SideEffects, "refused before reaching the server: %v", err)
	return te.Type
}

// TestDefinitionChangedAfterListChanged: a server that swaps a tool's
// definition while connected (tools/list_changed) gets the tool disabled
// in the registry and in the executor until an operator approves the new
// hash with the ApproveTool RPC; the new definition is never called before.
func TestDefinitionChangedAfterListChanged(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	srv := newFixtureServer(fixtureOptions{running: tempDir(t), variant: "v1"})
	url := httpServer(t, srv)
	e := newExecutor(t, testConfig(mcp.ServerConfig{Name: "fix", HTTP: &mcp.HTTPConfig{URL: url}, Required: true}),
		mcp.Options{Registry: s.Env.Bus.Registry, Conn: s.Env.Bus.NC, Writer: mcpWriter(s)})
	const name = "mcp__fix__versioned"
	s.StartExecutorWorker(t, mcpType, e, e.Specs()...)
	s.WaitTool(t, name)

	resp := call(t, s, name, `{"path":"a"}`)
	require.True(t, resp.Ok, "%v", resp.Error)
	require.Equal(t, "versioned v1", resp.Content[0].GetText().GetText())
	v1, err := s.Registry.Get(name)
	require.NoError(t, err)
	oldHash := v1.Spec.GetMcp().GetDefinitionHash()
	approved, ok, err := registry.Approved(t.Context(), s.Env.Bus.Registry, name)
	require.NoError(t, err)
	require.True(t, ok, "trust on first use recorded the first definition")
	require.Equal(t, oldHash, approved)

	// The server swaps the tool under the agents.
	var v2Calls atomic.Int64
	srv.AddTool(versionedTool("v2"), func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		v2Calls.Add(1)
		return text("versioned v2"), nil
	})
	disabled := waitSpec(t, s, name, func(sp *toolwirev1.ToolSpec) bool { return sp.Disabled })
	newHash := disabled.GetMcp().GetDefinitionHash()
	require.NotEqual(t, oldHash, newHash)
	require.Contains(t, disabled.DisabledReason, "from "+oldHash+" to "+newHash)
	require.Contains(t, disabled.DisabledReason, "toolctl tools approve "+name+" --hash "+newHash)

	// Admission refuses it; the executor refuses it whatever spec a call carries.
	resp = call(t, s, name, `{"path":"a"}`)
	require.False(t, resp.Ok)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, resp.Error.Type)
	require.Contains(t, resp.Error.Message, "disabled")
	_, err = execute(e, disabled, `{"path":"a"}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, errorType(t, err))
	require.Contains(t, tool.AsError(context.Background(), err).Suggestion, "--hash "+newHash)
	_, err = execute(e, v1.Spec, `{"path":"a"}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, errorType(t, err))
	require.Zero(t, v2Calls.Load(), "the changed definition was never called")

	// Approving another hash than the current definition's is refused.
	_, err = s.Client.ApproveTool(t.Context(), connect.NewRequest(&toolwirev1.ApproveToolRequest{Name: name, DefinitionHash: oldHash}))
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err))

	// The operator approves the new definition: the tool serves again.
	_, err = s.Client.ApproveTool(t.Context(), connect.NewRequest(&toolwirev1.ApproveToolRequest{Name: name, DefinitionHash: newHash}))
	require.NoError(t, err)
	enabled := waitSpec(t, s, name, func(sp *toolwirev1.ToolSpec) bool { return !sp.Disabled })
	require.Equal(t, newHash, enabled.GetMcp().GetDefinitionHash())
	require.Contains(t, enabled.InputSchemaJson, `"command"`)
	res, err := execute(e, enabled, `{"path":"a"}`)
	require.NoError(t, err)
	require.Equal(t, "versioned v2", res.Content[0].GetText().GetText())
	require.EqualValues(t, 1, v2Calls.Load())

	// A call admitted for the old definition does not reach the new one.
	_, err = execute(e, v1.Spec, `{"path":"a"}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, errorType(t, err))
	require.EqualValues(t, 1, v2Calls.Load())

	// A tool the server stops offering is published disabled and refused.
	audio, err := s.Registry.Get("mcp__fix__audio")
	require.NoError(t, err)
	srv.RemoveTools("audio")
	gone := waitSpec(t, s, "mcp__fix__audio", func(sp *toolwirev1.ToolSpec) bool { return sp.Disabled })
	require.Contains(t, gone.DisabledReason, "no longer offers")
	_, err = execute(e, audio.Spec, `{}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, errorType(t, err))
}

// TestDefinitionChangedAcrossRestart: a stdio server restarted with another
// definition of a tool (a new release) has the tool published disabled at
// start-up; after approval the same worker serves it end to end.
func TestDefinitionChangedAcrossRestart(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	kv := s.Env.Bus.Registry
	const name = "mcp__fix__versioned"

	e1, err := mcp.New(t.Context(), testConfig(stdioServer(t, "fix", map[string]string{envVariant: "v1"})),
		mcp.Options{Registry: kv, Conn: s.Env.Bus.NC, Writer: mcpWriter(s), Logger: testLogger(t)})
	require.NoError(t, err)
	w1 := s.StartExecutorWorker(t, mcpType, e1, e1.Specs()...)
	s.WaitTool(t, name)
	resp := call(t, s, name, `{"path":"a"}`)
	require.True(t, resp.Ok, "%v", resp.Error)
	require.Equal(t, "versioned v1", resp.Content[0].GetText().GetText())
	oldHash := waitSpec(t, s, name, func(*toolwirev1.ToolSpec) bool { return true }).GetMcp().GetDefinitionHash()
	require.NoError(t, w1.Stop(t.Context()))
	require.NoError(t, e1.Close(t.Context()))

	e2 := newExecutor(t, testConfig(stdioServer(t, "fix", map[string]string{envVariant: "v2"})), mcp.Options{Registry: kv, Conn: s.Env.Bus.NC, Writer: mcpWriter(s)})
	specs := specsByTool(e2)
	require.True(t, specs["versioned"].Disabled)
	newHash := specs["versioned"].GetMcp().GetDefinitionHash()
	require.Contains(t, specs["versioned"].DisabledReason, "from "+oldHash+" to "+newHash)
	require.False(t, specs["echo"].Disabled, "unchanged tools stay enabled")
	s.StartExecutorWorker(t, mcpType, e2, e2.Specs()...)
	waitSpec(t, s, name, func(sp *toolwirev1.ToolSpec) bool { return sp.Disabled })
	resp = call(t, s, name, `{"path":"a"}`)
	require.False(t, resp.Ok)
	require.Contains(t, resp.Error.Message, "disabled")

	_, err = s.Client.ApproveTool(t.Context(), connect.NewRequest(&toolwirev1.ApproveToolRequest{Name: name, DefinitionHash: newHash}))
	require.NoError(t, err)
	waitSpec(t, s, name, func(sp *toolwirev1.ToolSpec) bool { return !sp.Disabled })
	resp = call(t, s, name, `{"path":"a"}`)
	require.True(t, resp.Ok, "%v", resp.Error)
	require.Equal(t, "versioned v2", resp.Content[0].GetText().GetText())
}

// mcpWriter writes the registry for the MCP pool of s's executor workers
// (dispatchtest.StartExecutorWorker: pool "mcp"), as a dispatcher does.
func mcpWriter(s *dispatchtest.Stack) registry.PoolWriter {
	return registry.PoolWriter{Writer: registry.NewRegistrar(s.Env.Bus, nil, nil, ""), Pool: "mcp", Type: mcpType}
}
