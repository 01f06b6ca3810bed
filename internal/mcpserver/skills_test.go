package mcpserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/workerconfig"
)

// An MCP client sees the skills of a worker's skills directories as the
// `skill` tool, listed with the skills' names and descriptions, and loads
// a skill's instructions and one of its files (an embedded skill://
// resource) through tools/call, as any tool; a policy rule over
// args.name denies both.
func TestSkillsThroughMCP(t *testing.T) {
	t.Parallel()
	f, err := workerconfig.Load("../../examples/skills/worker.yaml")
	require.NoError(t, err)
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	s.StartWorkerFile(t, f)
	s.WaitTool(t, "skill")
	cs := connect(t, endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default}), "any", "")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	lt, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var skill *mcp.Tool
	for _, tl := range lt.Tools {
		if tl.Name == "skill" {
			skill = tl
		}
	}
	require.NotNil(t, skill)
	require.Contains(t, skill.Description, "- release-notes: Writes the release notes")

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "skill", Arguments: map[string]any{"name": "release-notes"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	require.True(t, strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "# Release notes\n"))

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "skill", Arguments: map[string]any{"name": "release-notes", "resource": "template.md"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	r, ok := res.Content[0].(*mcp.EmbeddedResource)
	require.True(t, ok, "%#v", res.Content[0])
	require.Equal(t, "skill://release-notes/template.md", r.Resource.URI)
	require.Equal(t, "text/markdown", r.Resource.MIMEType)
	require.True(t, strings.HasPrefix(r.Resource.Text, "# toolwire vX.Y.Z\n"))

	// The policy decides each skill through /mcp too: a rule over
	// args.name refuses the instructions and the skill's files alike.
	s.ApplyPolicy(t, `tenant:
  default: allow
  rules:
    - id: no-release-skills
      effect: deny
      tools: [skill]
      when: args.name.startsWith("release-")
      reason: release skills are not for this client
`)
	for _, args := range []map[string]any{{"name": "release-notes"}, {"name": "release-notes", "resource": "template.md"}} {
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "skill", Arguments: args})
		require.NoError(t, err)
		require.True(t, res.IsError, "denied: %v", args)
		text := res.Content[0].(*mcp.TextContent).Text
		require.Contains(t, text, "release skills are not for this client", "%v", args)
		require.Len(t, res.Content, 1, "%v", args)
		for _, content := range []string{"# Release notes", "# toolwire vX.Y.Z"} {
			require.NotContains(t, text, content, "no content of the skill: %v", args)
		}
	}
}
