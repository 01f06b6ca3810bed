package dispatch_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/workerconfig"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// docsSkills returns the examples of docs/skills.md by the name on the
// `<!-- example: NAME -->` line before each block: the files the page
// shows (checked to be shown as they are) and its policy.
func docsSkills(t *testing.T) map[string]string {
	t.Helper()
	src, err := os.ReadFile("../../docs/skills.md")
	require.NoError(t, err)
	out := map[string]string{}
	for _, m := range regexp.MustCompile("<!-- example: ([^ ]+) -->\n```[a-z]+\n((?s:.*?))```\n").FindAllStringSubmatch(string(src), -1) {
		out[m[1]] = m[2]
	}
	require.Len(t, out, 3, "docs/skills.md has its examples")
	for _, f := range []string{"examples/skills/worker.yaml", "examples/skills/skills/release-notes/SKILL.md"} {
		b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(f)))
		require.NoError(t, err)
		require.Equal(t, string(b), out[f], "docs/skills.md shows %s as it is", f)
	}
	return out
}

// The acceptance test of skills as tools, with the examples of
// docs/skills.md: a worker configured with the example's skills
// directory registers one tool, `skill`, listed with the skill's
// summary and its manifest; the support bot's call loading the skill is
// denied by a rule naming the skill (its `name` argument), and loads
// once a policy without that rule is in force; another caller's call
// asks, and after its approval as a session grant returns the skill's
// instructions, and the grant covers the session's next call, which
// reads one of the skill's files.
func TestSkillsAsTools(t *testing.T) {
	t.Parallel()
	ex := docsSkills(t)
	f, err := workerconfig.Load("../../examples/skills/worker.yaml")
	require.NoError(t, err)
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	s.StartWorkerFile(t, f)
	s.WaitTool(t, "skill")
	s.ApplyPolicy(t, ex["policy"])
	ctx := t.Context()

	list, err := s.Client.ListTools(ctx, connect.NewRequest(&toolwirev1.ListToolsRequest{}))
	require.NoError(t, err)
	var spec *toolwirev1.ToolSpec
	for _, sp := range list.Msg.Tools {
		if sp.Name == "skill" {
			spec = sp
		}
	}
	require.NotNil(t, spec, "the skill tool is listed")
	require.Contains(t, spec.Description, "- release-notes: Writes the release notes of a toolwire release")
	openai, err := s.Client.ListTools(ctx, connect.NewRequest(&toolwirev1.ListToolsRequest{Format: toolwirev1.ToolFormat_TOOL_FORMAT_OPENAI}))
	require.NoError(t, err)
	require.Contains(t, openai.Msg.ToolsJson, "- release-notes: Writes the release notes", "the exports list the skills")
	require.Len(t, spec.Skills, 1)
	var paths []string
	for _, fl := range spec.Skills[0].Files {
		paths = append(paths, fl.Path)
	}
	require.Equal(t, []string{"SKILL.md", "examples/v1.2.0.md", "template.md"}, paths)

	skillMD := ex["examples/skills/skills/release-notes/SKILL.md"]
	_, instructions, ok := strings.Cut(strings.TrimPrefix(skillMD, "---\n"), "\n---\n")
	require.True(t, ok)
	instructions = strings.TrimLeft(instructions, "\n")
	load := func(id identity.Identity, session, args string) *toolwirev1.CallResponse {
		r, err := s.Dispatcher.Call(ctx, id, &toolwirev1.CallRequest{Tool: "skill", ArgumentsJson: args, Session: session}, 30*time.Second)
		require.NoError(t, err)
		return r
	}
	bot := identity.Identity{Tenant: identity.Default.Tenant, Agent: "support-bot", Scopes: []string{"tools"}}
	r := load(bot, "b1", `{"name":"release-notes"}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.GetResponse().GetError().GetType(), "%v", r.GetResponse())
	require.Contains(t, r.GetResponse().GetError().GetMessage(), "the support bot does not cut releases")

	first := load(identity.Default, "s1", `{"name":"release-notes"}`)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, first.State, "the rule asks")
	_, g, err := s.Dispatcher.Approvals().Approve(ctx, approver, &toolwirev1.ApproveRequest{Id: first.CallId,
		Scope: toolwirev1.ApprovalScope_APPROVAL_SCOPE_SESSION, ArgsPattern: map[string]string{"name": "release-notes"},
		Ttl: durationpb.New(time.Hour), Reason: "release day"})
	require.NoError(t, err)
	require.NotNil(t, g)
	got := waitResult(t, s, first.CallId)
	require.True(t, got.Ok, "%v", got.Error)
	require.Equal(t, instructions, got.Content[0].GetText().GetText(), "the instructions of SKILL.md")
	require.Contains(t, got.Content[1].GetText().GetText(), "template.md (text/markdown")

	r = load(identity.Default, "s1", `{"name":"release-notes","resource":"template.md"}`)
	require.True(t, r.GetResponse().GetOk(), "the grant covers the session's next load: %v", r.GetResponse().GetError())
	res := r.GetResponse().GetContent()[0].GetResource()
	require.Equal(t, "skill://release-notes/template.md", res.GetUri())
	template, err := os.ReadFile("../../examples/skills/skills/release-notes/template.md")
	require.NoError(t, err)
	require.Equal(t, string(template), res.GetText())
	require.Equal(t, toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, load(identity.Default, "s2", `{"name":"release-notes"}`).State,
		"another session still asks")
	r = load(identity.Default, "s1", `{"name":"no-such-skill"}`)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, r.GetResponse().GetError().GetType())

	s.ApplyPolicy(t, "tenant:\n  default: allow\n")
	r = load(bot, "b1", `{"name":"release-notes"}`)
	require.True(t, r.GetResponse().GetOk(), "a policy without the rule: %v", r.GetResponse().GetError())
	require.Equal(t, instructions, r.GetResponse().GetContent()[0].GetText().GetText())
}
