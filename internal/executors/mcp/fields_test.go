package mcp_test

import (
	"encoding/json"
	"testing"

	"connectrpc.com/connect"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/executors/mcp"
	"github.com/toolwire/toolwire/internal/mcpcontent"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The fields of results and tools the mapping keeps, over every
// transport: a result's _meta, an annotation's priority 0 (which the SDK's
// own types drop), a resource link's icons, a tool's _meta, icons and
// execution.taskSupport; a tool that requires task augmentation is
// disabled with the reason, one that merely allows it is served.
func TestFieldsKept(t *testing.T) {
	t.Parallel()
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		e := newExecutor(t, testConfig(stdioServer(t, "fx", map[string]string{envDecor: "1", envRunning: tempDir(t)})), mcp.Options{})
		checkFields(t, e)
	})
	for _, js := range []bool{false, true} {
		name := "http-sse"
		if js {
			name = "http-json"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url := decoratedHTTPServer(t, newFixtureServer(fixtureOptions{running: tempDir(t)}), js)
			e := newExecutor(t, testConfig(mcp.ServerConfig{Name: "fx", HTTP: &mcp.HTTPConfig{URL: url}, Required: true}), mcp.Options{})
			checkFields(t, e)
		})
	}
}

func checkFields(t *testing.T, e *mcp.Executor) {
	t.Helper()
	byTool := specsByTool(e)
	dec := byTool["decorated"]
	require.NotNil(t, dec)
	require.False(t, dec.Disabled)
	require.JSONEq(t, `{"acme/ui":{"widget":"table","rows":3}}`, dec.MetaJson)
	require.Equal(t, fixtureIcons, mcpcontent.IconsToMCP(dec.Icons))
	require.Empty(t, dec.GetMcp().GetTaskSupport())

	only := byTool["task_only"]
	require.True(t, only.Disabled, "a tool that requires tasks is not advertised as callable")
	require.Contains(t, only.DisabledReason, `requires task augmentation to call tool "task_only"`)
	require.Equal(t, "required", only.GetMcp().GetTaskSupport())
	opt := byTool["task_optional"]
	require.False(t, opt.Disabled)
	require.Equal(t, "optional", opt.GetMcp().GetTaskSupport())
	require.Equal(t, toolwirev1.TaskSupport_TASK_SUPPORT_OPTIONAL, opt.TaskSupport)
	require.Equal(t, toolwirev1.TaskSupport_TASK_SUPPORT_REQUIRED, only.TaskSupport)
	require.Equal(t, toolwirev1.TaskSupport_TASK_SUPPORT_FORBIDDEN, dec.TaskSupport, "none written: MCP's default")

	res, err := execute(e, byTool["annotated"], `{}`)
	require.NoError(t, err)
	c := res.Content
	require.Len(t, c, 4)
	require.NotNil(t, c[0].GetAnnotations().Priority, "priority 0 is kept")
	require.Zero(t, c[0].GetAnnotations().GetPriority())
	require.Equal(t, []string{"user"}, c[0].GetAnnotations().GetAudience())
	require.InDelta(t, 0.5, c[1].GetAnnotations().GetPriority(), 0)
	require.NotNil(t, c[2].GetAnnotations().Priority, "annotations of a priority 0 alone are kept")
	require.Nil(t, c[3].GetAnnotations(), "no annotations stay none")
	require.Equal(t, fixtureIcons, mcpcontent.IconsToMCP(c[3].GetResourceLink().GetIcons()))
	requireResultMeta(t, string(res.Meta))

	_, err = execute(e, only, `{}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, errorType(t, err))
	require.ErrorContains(t, err, "requires task augmentation")
	res, err = execute(e, opt, `{}`)
	require.NoError(t, err)
	require.Equal(t, "task_optional called without a task", res.Content[0].GetText().GetText())
}

// Through a worker and the dispatcher: the response carries the result's
// _meta and the priority 0; the registry holds the tool's icons and _meta
// (shown in the MCP rendering of the tool list, with the server's
// execution); the
// task-only tool is refused at admission with the reason.
func TestFieldsReachTheCaller(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	e := newExecutor(t, testConfig(stdioServer(t, "fx", map[string]string{envDecor: "1", envRunning: tempDir(t)})),
		mcp.Options{Registry: s.Env.Bus.Registry, Conn: s.Env.Bus.NC, Writer: mcpWriter(s)})
	s.StartExecutorWorker(t, mcpType, e, e.Specs()...)
	for _, n := range []string{"mcp__fx__annotated", "mcp__fx__decorated", "mcp__fx__task_only"} {
		s.WaitTool(t, n)
	}

	resp := call(t, s, "mcp__fx__annotated", `{}`)
	require.True(t, resp.Ok, "%v", resp.Error)
	requireResultMeta(t, resp.MetaJson)
	require.NotNil(t, resp.Content[0].GetAnnotations().Priority)
	require.Zero(t, resp.Content[0].GetAnnotations().GetPriority())
	require.Len(t, resp.Content[3].GetResourceLink().GetIcons(), len(fixtureIcons))

	resp = call(t, s, "mcp__fx__task_only", `{}`)
	require.False(t, resp.Ok)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, resp.Error.Type)
	require.Contains(t, resp.Error.Message, "requires task augmentation")

	list, err := s.Client.ListTools(t.Context(), connect.NewRequest(&toolwirev1.ListToolsRequest{
		Format: toolwirev1.ToolFormat_TOOL_FORMAT_MCP, NameGlob: "mcp__fx__decorated"}))
	require.NoError(t, err)
	var rendered struct {
		Tools []struct {
			Name      string          `json:"name"`
			Icons     []sdk.Icon      `json:"icons"`
			Meta      json.RawMessage `json:"_meta"`
			Execution json.RawMessage `json:"execution"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal([]byte(list.Msg.ToolsJson), &rendered))
	require.Len(t, rendered.Tools, 1)
	require.Equal(t, fixtureIcons, rendered.Tools[0].Icons)
	require.JSONEq(t, `{"acme/ui":{"widget":"table","rows":3}}`, string(rendered.Tools[0].Meta))
	// The backend server's task support, as it wrote it: none is MCP's
	// default, "forbidden" (the fleet's MCP endpoint advertises it).
	require.JSONEq(t, `{"taskSupport":"forbidden"}`, string(rendered.Tools[0].Execution))
}

// requireResultMeta checks the annotated tool's result _meta, as JSON:
// its own keys as it gave them (the SDK's server adds its own, kept too).
func requireResultMeta(t *testing.T, js string) {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(js), &m))
	require.JSONEq(t, `"t-1"`, string(m["acme/trace"]))
	require.JSONEq(t, `{"list":[1,"two",null]}`, string(m["acme/nested"]))
}
