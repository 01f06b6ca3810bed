package dispatch_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/approvalflow"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/specfile"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

type grepIn struct {
	Pattern string `json:"pattern"`
	Text    string `json:"text"`
}

// docsDefinitionsSpec is the spec file of docs/toolsets.md's "Definitions
// in the spec", parsed as a worker loads it.
func docsDefinitionsSpec(t *testing.T) *toolwirev1.ToolSpec {
	t.Helper()
	src, err := os.ReadFile("../../docs/toolsets.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)```yaml\n(name: grep_lines\n.*?)```").FindSubmatch(src)
	require.NotNil(t, m, "docs/toolsets.md has the spec file")
	spec, err := specfile.Parse(m[1], specfile.Options{})
	require.NoError(t, err)
	require.Len(t, spec.Definitions, 2)
	return spec
}

// docsDefinitionsTool is docsDefinitionsSpec and a Go tool declaring the
// same definitions.
func docsDefinitionsTool(t *testing.T) (*toolwirev1.ToolSpec, *tool.Tool) {
	t.Helper()
	spec := docsDefinitionsSpec(t)
	opts := []tool.Option{tool.WithSummary(spec.Summary)}
	for _, d := range spec.Definitions {
		opts = append(opts, tool.WithDefinition(tool.Definition{ModelFamilies: d.ModelFamilies, Modes: d.Modes,
			Hidden: d.Hidden, Description: d.Description, InputSchema: d.InputSchemaJson}))
	}
	return spec, tool.Must(tool.New("grep_lines", func(_ context.Context, in grepIn) (string, error) { return "found " + in.Pattern, nil }, opts...))
}

// A spec's definitions (docs/toolsets.md, "Definitions in the spec"): the
// example's grep_lines is hidden from a session in voice mode, listed and
// exported to a Gemini-family model with its definition's description and
// schema, each call checked against the definition it was offered as well
// as the tool's schema; a request of another family, or of none, is
// offered the tool as registered. A mode set on the session changes what
// its next list and call see.
func TestSpecDefinitionsPerModelAndMode(t *testing.T) {
	t.Parallel()
	spec, grep := docsDefinitionsTool(t)
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{grep}})
	s.ApplyPolicy(t, "tenant:\n  default: allow\nmodes:\n  voice: {}\n  plan: {}\n")

	list := func(model, session string, f toolwirev1.ToolFormat) *toolwirev1.ListToolsResponse {
		r, err := s.Client.ListTools(t.Context(), connect.NewRequest(&toolwirev1.ListToolsRequest{Model: model, Session: session, Format: f}))
		require.NoError(t, err)
		return r.Msg
	}
	find := func(l *toolwirev1.ListToolsResponse) *toolwirev1.ToolSpec {
		for _, sp := range l.Tools {
			if sp.Name == "grep_lines" {
				return sp
			}
		}
		return nil
	}
	own := find(list("", "", 0))
	require.NotNil(t, own)
	require.Equal(t, spec.Summary, own.Summary)
	require.NotContains(t, own.InputSchemaJson, "A-Za-z0-9")
	gemini := find(list("gemini-2.5-pro", "", 0))
	require.NotNil(t, gemini)
	require.Equal(t, spec.Definitions[1].Description, gemini.Summary)
	require.Contains(t, gemini.InputSchemaJson, "A-Za-z0-9")
	require.Equal(t, own.Version, gemini.Version, "a definition is applied on top of the registered spec")
	require.Equal(t, own.InputSchemaJson, find(list("gpt-5.1", "", 0)).InputSchemaJson, "another family: the tool as registered")
	require.Contains(t, list("gemini-2.5-pro", "", toolwirev1.ToolFormat_TOOL_FORMAT_OPENAI).ToolsJson, "letters and digits only")
	got, err := s.Client.GetTool(t.Context(), connect.NewRequest(&toolwirev1.GetToolRequest{Name: "grep_lines", Model: "gemini-2.5-pro"}))
	require.NoError(t, err)
	require.Contains(t, got.Msg.GetTool().GetInputSchemaJson(), "A-Za-z0-9")

	run := func(model, session, pattern string) *toolwirev1.ToolResponse {
		return call(t, s.Client, &toolwirev1.CallRequest{Tool: "grep_lines", Model: model, Session: session,
			ArgumentsJson: `{"pattern":"` + pattern + `","text":"a\nb"}`}).Response
	}
	require.True(t, run("gemini-2.5-pro", "", "word").Ok)
	r := run("gemini-2.5-pro", "", "a.*b")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, r.GetError().GetType(), "the gemini definition takes words only")
	require.Contains(t, r.GetError().GetMessage(), "definition model family gemini")
	require.True(t, run("gpt-5.1", "", "a.*b").Ok, "another family: the tool's schema alone")
	require.True(t, run("", "", "a.*b").Ok)

	ctx := t.Context()
	_, err = s.Dispatcher.SetSessionMode(ctx, identity.Default, "s-talk", "plan")
	require.NoError(t, err)
	require.NotNil(t, find(list("", "s-talk", 0)), "plan: listed")
	require.True(t, run("", "s-talk", "a.*b").Ok)
	_, err = s.Dispatcher.SetSessionMode(ctx, identity.Default, "s-talk", "voice")
	require.NoError(t, err)
	require.Nil(t, find(list("", "s-talk", 0)), "voice: hidden")
	require.Nil(t, find(list("gemini-2.5-pro", "s-talk", 0)), "the first definition that matches applies")
	require.NotNil(t, find(list("", "", 0)), "another session, or none, is unchanged")
	for _, model := range []string{"", "gemini-2.5-pro"} {
		r = run(model, "s-talk", "word")
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.GetError().GetType(), model)
		require.Contains(t, r.GetError().GetMessage(), `in mode "voice" (its spec's definitions[0] hides it)`)
	}
}

// A call parked for approval, approved after its session's mode changed to
// one whose definition hides the tool, or whose definition's schema its
// arguments do not satisfy, is refused MODE_RESTRICTED as admission
// would refuse it in that mode now: it never runs.
func TestApprovingACallTheModesDefinitionRefusesDoesNotRunIt(t *testing.T) {
	t.Parallel()
	l := &ledger{runs: map[string]int{}}
	fsWrite := l.tool("fs_write",
		tool.WithDefinition(tool.Definition{Modes: []string{"quiet"}, Hidden: true}),
		tool.WithDefinition(tool.Definition{Modes: []string{"narrow"}, InputSchema: `{"type":"object","properties":{"path":{"type":"string","maxLength":4}}}`}))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{fsWrite},
		Dispatcher: dispatch.Config{Policies: mustPolicy(t, askWrites+"modes:\n  quiet: {}\n  narrow: {}\n")}})
	ctx := t.Context()
	for session, mode := range map[string]string{"s-quiet": "quiet", "s-narrow": "narrow"} {
		parked := write(t, s.Dispatcher, session, "/tmp/long-path")
		require.Equal(t, toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, parked.State)
		s.SetMode(t, session, mode)
		_, _, err := s.Dispatcher.Approvals().Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: parked.CallId, Reason: "fine"})
		require.True(t, errors.Is(err, approvalflow.ErrPolicyDenies), "%s: %v", mode, err)
		r := waitResult(t, s, parked.CallId)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_MODE_RESTRICTED, r.GetError().GetType(), "%s: %v", mode, r.GetError())
		require.Contains(t, r.GetError().GetMessage(), "definitions[")
		require.NotContains(t, r.GetError().GetMessage(), "long-path", "no argument value in the refusal")
		require.Zero(t, l.count(parked.CallId), "%s: the call never ran", mode)
	}
}

// A request without a session is in the policy's sessions.default_mode
// for a spec's definitions, as it is for the policy: a tool hidden in
// that mode is not listed, not got for a model, and its calls are
// refused; GetTool without a model shows the registered spec, its
// definitions with it. A call a definition refuses pins nothing in a
// session that pins versions: the definition step comes before the pin.
func TestSpecDefinitionsInTheDefaultModeAndPins(t *testing.T) {
	t.Parallel()
	grep := tool.Must(tool.New("grep_lines", func(_ context.Context, in grepIn) (string, error) { return "found " + in.Pattern, nil },
		tool.WithDefinition(tool.Definition{Modes: []string{"voice"}, Hidden: true})))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{grep}})
	s.ApplyPolicy(t, "tenant:\n  default: allow\n  sessions: {pin_versions: true}\nmodes:\n  voice: {}\n  text: {}\nsessions:\n  default_mode: voice\n")
	ctx := t.Context()
	names := func(session string) []string {
		r, err := s.Client.ListTools(ctx, connect.NewRequest(&toolwirev1.ListToolsRequest{Session: session}))
		require.NoError(t, err)
		var out []string
		for _, sp := range r.Msg.Tools {
			out = append(out, sp.Name)
		}
		return out
	}
	require.NotContains(t, names(""), "grep_lines", "no session: the default mode, voice")
	_, err := s.Client.GetTool(ctx, connect.NewRequest(&toolwirev1.GetToolRequest{Name: "grep_lines", Model: "gemini-2.5-pro"}))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "%v", err)
	got, err := s.Client.GetTool(ctx, connect.NewRequest(&toolwirev1.GetToolRequest{Name: "grep_lines"}))
	require.NoError(t, err)
	require.Len(t, got.Msg.GetTool().GetDefinitions(), 1, "without a model, the registered spec")

	run := func(session string) *toolwirev1.ToolResponse {
		return call(t, s.Client, &toolwirev1.CallRequest{Tool: "grep_lines", Session: session, ArgumentsJson: `{"pattern":"a","text":"a"}`}).Response
	}
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, run("").GetError().GetType())
	r := run("s-quiet") // a session without a mode: the default mode
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.GetError().GetType(), "%v", r.GetError())
	sess, err := s.Dispatcher.GetSession(ctx, identity.Default, "s-quiet")
	require.NoError(t, err)
	require.Empty(t, sess.GetPinnedVersions(), "a refused call pins nothing")

	s.SetMode(t, "s-quiet", "text")
	require.Contains(t, names("s-quiet"), "grep_lines")
	require.True(t, run("s-quiet").GetOk())
	sess, err = s.Dispatcher.GetSession(ctx, identity.Default, "s-quiet")
	require.NoError(t, err)
	require.Contains(t, sess.GetPinnedVersions(), "grep_lines", "a call that runs pins its version")
}

// A tool offered with both a spec's definition and a toolset's schema
// variant is listed, exported and shown with both schemas (allOf), since
// its calls must satisfy both: a call that one of them refuses is refused,
// one both take runs.
func TestADefinitionAndAVariantAreListedTogether(t *testing.T) {
	t.Parallel()
	_, grep := docsDefinitionsTool(t)
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{grep}})
	s.ApplyPolicy(t, `tenant:
  default: allow
model_families:
  - {family: gemini, models: ["gemini-*"]}
toolsets:
  gemini:
    variants:
      grep_lines:
        input_schema: {type: object, required: [pattern, text], properties: {pattern: {type: string, maxLength: 8}, text: {type: string}}}
`)
	const model = "gemini-2.5-pro"
	r, err := s.Client.ListTools(t.Context(), connect.NewRequest(&toolwirev1.ListToolsRequest{Model: model}))
	require.NoError(t, err)
	var listed *toolwirev1.ToolSpec
	for _, sp := range r.Msg.Tools {
		if sp.Name == "grep_lines" {
			listed = sp
		}
	}
	require.NotNil(t, listed)
	for _, want := range []string{"allOf", "A-Za-z0-9", `"maxLength":8`} {
		require.Contains(t, listed.InputSchemaJson, want, "the definition's schema and the variant's")
	}
	got, err := s.Client.GetTool(t.Context(), connect.NewRequest(&toolwirev1.GetToolRequest{Name: "grep_lines", Model: model}))
	require.NoError(t, err)
	require.Equal(t, listed.InputSchemaJson, got.Msg.GetTool().GetInputSchemaJson())

	run := func(pattern string) *toolwirev1.ToolResponse {
		return call(t, s.Client, &toolwirev1.CallRequest{Tool: "grep_lines", Model: model,
			ArgumentsJson: `{"pattern":"` + pattern + `","text":"a\nb"}`}).Response
	}
	require.True(t, run("word").Ok, "both schemas take it")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, run("a.*b").GetError().GetType(), "the definition refuses it")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, run("wordwordword").GetError().GetType(), "the variant refuses it")
}
