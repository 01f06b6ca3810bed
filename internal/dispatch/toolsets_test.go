package dispatch_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

type editIn struct {
	Path string `json:"path"`
	Old  string `json:"old"`
	New  string `json:"new"`
}

type patchIn struct {
	Patch string `json:"patch"`
	Strip int    `json:"strip,omitempty"`
}

type shellIn struct {
	Cmd string `json:"cmd"`
}

// familyTool is a tool that answers with the model family its call
// carries (what the worker was handed, from the dispatcher's Caller).
func familyTool[In any](name string) *tool.Tool {
	return tool.Must(tool.New(name, func(ctx context.Context, _ In) (string, error) {
		info, _ := tool.CallInfoFrom(ctx)
		return info.Caller.GetModel() + "/" + info.Caller.GetModelFamily(), nil
	}))
}

// docsToolsetsPolicy is the example of docs/toolsets.md.
func docsToolsetsPolicy(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("../../docs/toolsets.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(src)
	require.NotNil(t, m, "docs/toolsets.md has its example")
	return string(m[1])
}

// The acceptance test of tools per model, with the example of
// docs/toolsets.md in force: a GPT-family caller is offered apply_patch
// (its variant) where a Claude-family caller is offered edit (its
// variant); each call is validated against the variant its model was
// offered as well as the tool's schema; a hidden or substituted tool is
// refused naming the toolset; CEL sees caller.model_family; the call
// carries model and family to the worker; no model changes nothing.
func TestToolsetsPerModel(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{
		familyTool[editIn]("edit"), familyTool[patchIn]("apply_patch"), familyTool[shellIn]("shell"),
	}})
	s.ApplyPolicy(t, docsToolsetsPolicy(t))

	list := func(model string, f toolwirev1.ToolFormat) *toolwirev1.ListToolsResponse {
		r, err := s.Client.ListTools(t.Context(), connect.NewRequest(&toolwirev1.ListToolsRequest{Model: model, Format: f}))
		require.NoError(t, err)
		return r.Msg
	}
	schemas := func(l *toolwirev1.ListToolsResponse) map[string]string {
		out := map[string]string{}
		for _, sp := range l.Tools {
			out[sp.Name] = sp.InputSchemaJson
		}
		return out
	}
	gpt := schemas(list("gpt-5.1", 0))
	require.ElementsMatch(t, []string{"apply_patch"}, keys(gpt), "gpt: apply_patch for edit, shell hidden")
	require.Contains(t, gpt["apply_patch"], `"maxLength":4096`)
	require.Equal(t, gpt, schemas(list("o3", 0)), "o3 is gpt by model_families")
	claude := schemas(list("claude-sonnet-4-5", 0))
	require.ElementsMatch(t, []string{"edit", "shell"}, keys(claude), "claude: apply_patch hidden; shell denied by a condition only")
	require.Contains(t, claude["edit"], `"maxLength":256`)
	none := schemas(list("", 0))
	require.ElementsMatch(t, []string{"apply_patch", "edit", "shell"}, keys(none))
	require.NotContains(t, none["edit"], "maxLength", "without a model, the tool's own schema")
	require.NotContains(t, none["apply_patch"], "maxLength")

	openai := list("gpt-5.1", toolwirev1.ToolFormat_TOOL_FORMAT_OPENAI).ToolsJson
	require.Contains(t, openai, `"apply_patch"`)
	require.Contains(t, openai, `4096`, "the export carries the variant")
	require.NotContains(t, openai, `"edit"`)
	require.NotContains(t, list("claude-sonnet-4-5", toolwirev1.ToolFormat_TOOL_FORMAT_ANTHROPIC).ToolsJson, `"apply_patch"`)

	run := func(model, name, argsJSON string) *toolwirev1.ToolResponse {
		return call(t, s.Client, &toolwirev1.CallRequest{Tool: name, ArgumentsJson: argsJSON, Model: model}).Response
	}
	r := run("gpt-5.1", "apply_patch", `{"patch":"--- a\n+++ b\n"}`)
	require.True(t, r.Ok, "%v", r.Error)
	require.Contains(t, r.GetContent()[0].GetText().GetText(), "gpt-5.1/gpt", "the call carries the model and its family")

	r = run("gpt-5.1", "apply_patch", `{"patch":"x","strip":1}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, r.GetError().GetType(), "strip is the tool's, not the gpt variant's")
	require.Contains(t, r.GetError().GetMessage(), "toolset gpt")
	require.True(t, run("", "apply_patch", `{"patch":"x","strip":1}`).Ok, "without a model, the tool's schema alone")

	r = run("gpt-5.1", "edit", `{"path":"a","old":"x","new":"y"}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.GetError().GetType())
	require.Contains(t, r.GetError().GetMessage(), "toolset gpt offers apply_patch instead")
	r = run("o3", "shell", `{"cmd":"ls"}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.GetError().GetType())
	require.Contains(t, r.GetError().GetMessage(), "hidden by toolset gpt")

	long := `{"path":"` + strings.Repeat("p", 300) + `","old":"x","new":"y"}`
	r = run("claude-sonnet-4-5", "edit", long)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, r.GetError().GetType(), "the claude variant bounds path")
	require.Contains(t, r.GetError().GetMessage(), "toolset claude")
	r = run("claude-sonnet-4-5", "edit", `{"path":"a","old":"x","new":"y"}`)
	require.True(t, r.Ok, "%v", r.Error)
	require.Contains(t, r.GetContent()[0].GetText().GetText(), "claude-sonnet-4-5/claude")
	require.True(t, run("", "edit", long).Ok, "without a model, the tool's schema alone")

	r = run("claude-sonnet-4-5", "apply_patch", `{"patch":"x"}`)
	require.Contains(t, r.GetError().GetMessage(), "hidden by toolset claude")
	r = run("claude-sonnet-4-5", "shell", `{"cmd":"ls"}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.GetError().GetType())
	require.Contains(t, r.GetError().GetMessage(), "shell is not offered to claude models", "the rule reads caller.model_family")
	require.True(t, run("gemini-2.5-pro", "shell", `{"cmd":"ls"}`).Ok, "a family without a toolset: every tool")

	r = run("not a model!", "shell", `{"cmd":"ls"}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, r.GetError().GetType())
	_, err := s.Client.ListTools(t.Context(), connect.NewRequest(&toolwirev1.ListToolsRequest{Model: "not a model!"}))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A toolset never grants: with default deny and a rule allowing only
// edit, a GPT-family caller whose toolset substitutes apply_patch for edit
// is offered neither tool, and a call of apply_patch is refused by the
// policy (the substitution does not make the substitute callable), while
// a caller without a model keeps edit alone.
func TestToolsetNeverGrants(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{
		familyTool[editIn]("edit"), familyTool[patchIn]("apply_patch"),
	}})
	s.ApplyPolicy(t, `tenant:
  default: deny
  rules:
    - {id: only-edit, effect: allow, tools: [edit]}
toolsets:
  gpt:
    substitute: {edit: apply_patch}
`)
	names := func(model string) []string {
		r, err := s.Client.ListTools(t.Context(), connect.NewRequest(&toolwirev1.ListToolsRequest{Model: model}))
		require.NoError(t, err)
		out := []string{}
		for _, sp := range r.Msg.Tools {
			out = append(out, sp.Name)
		}
		return out
	}
	require.Empty(t, names("gpt-5.1"), "edit is substituted, apply_patch is not allowed")
	require.Equal(t, []string{"edit"}, names(""))

	run := func(model, name, argsJSON string) *toolwirev1.ToolResponse {
		return call(t, s.Client, &toolwirev1.CallRequest{Tool: name, ArgumentsJson: argsJSON, Model: model}).Response
	}
	r := run("gpt-5.1", "apply_patch", `{"patch":"x"}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.GetError().GetType(), "the substitute is not granted")
	require.NotContains(t, r.GetError().GetMessage(), "toolset")
	r = run("gpt-5.1", "edit", `{"path":"a","old":"x","new":"y"}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.GetError().GetType())
	require.Contains(t, r.GetError().GetMessage(), "substituted by toolset gpt")
	require.NotContains(t, r.GetError().GetMessage(), "apply_patch", "the substitute is not named to a caller who may not list it")
	require.True(t, run("", "edit", `{"path":"a","old":"x","new":"y"}`).Ok, "without a model the rule allows edit")
}

// A refusal's REJECTED event carries the model and its family when the
// model is a model name: a toolset's refusal, a variant's and a rule's on
// caller.model_family; a model that is not a name is not recorded.
func TestToolsetRefusalRecordsModel(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{
		familyTool[editIn]("edit"), familyTool[patchIn]("apply_patch"), familyTool[shellIn]("shell"),
	}})
	s.ApplyPolicy(t, docsToolsetsPolicy(t))
	for _, c := range []struct{ model, tool, args, wantModel, wantFamily string }{
		{"gpt-5.1", "edit", `{"path":"a","old":"x","new":"y"}`, "gpt-5.1", "gpt"},     // substituted
		{"gpt-5.1", "apply_patch", `{"patch":"x","strip":1}`, "gpt-5.1", "gpt"},       // the variant
		{"claude-sonnet-4-5", "shell", `{"cmd":"ls"}`, "claude-sonnet-4-5", "claude"}, // the rule
		{"not a model!", "shell", `{"cmd":"ls"}`, "", ""},
	} {
		r := call(t, s.Client, &toolwirev1.CallRequest{Tool: c.tool, ArgumentsJson: c.args, Model: c.model})
		require.False(t, r.Response.Ok, c.model+" "+c.tool)
		m, err := bus.LastMsg(t.Context(), s.Env.Bus.Events, s.Env.Bus.Subjects.EventsAnyDispatcher("default", r.CallId))
		require.NoError(t, err)
		var ev toolwirev1.CallEvent
		require.NoError(t, proto.Unmarshal(m.Data, &ev))
		require.Equal(t, toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED, ev.Type)
		require.Equal(t, c.wantModel, ev.GetCaller().GetModel(), c.model+" "+c.tool)
		require.Equal(t, c.wantFamily, ev.GetCaller().GetModelFamily(), c.model+" "+c.tool)
	}
}

// An unknown tool's hint suggests only tools the caller's model is
// offered: a name close to one its toolset hides is not suggested to that
// model (it would be refused, and the list does not show it), while a
// model that is offered the tool gets it.
func TestUnknownToolHintFollowsTheToolset(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{
		familyTool[editIn]("edit"), familyTool[patchIn]("apply_patch"), familyTool[shellIn]("shell"),
	}})
	s.ApplyPolicy(t, docsToolsetsPolicy(t))
	hint := func(model string) string {
		r := call(t, s.Client, &toolwirev1.CallRequest{Tool: "shel", ArgumentsJson: `{"cmd":"ls"}`, Model: model}).Response
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, r.GetError().GetType())
		return r.GetError().GetSuggestion()
	}
	require.Contains(t, hint("claude-sonnet-4-5"), "did you mean shell?")
	require.NotContains(t, hint("gpt-5.1"), "shell", "the gpt toolset hides shell")
	require.Contains(t, hint(""), "did you mean shell?")
}
