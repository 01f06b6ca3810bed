package policy_test

import (
	"bytes"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/policy"
)

// Every YAML example of docs/policy.md is a policy document that parses
// (its tests, when it has any, pass on bare specs or its own annotations).
func TestDocsPolicyExamplesParse(t *testing.T) {
	src, err := os.ReadFile("../../docs/policy.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(src, -1)
	require.GreaterOrEqual(t, len(blocks), 3)
	for _, b := range blocks {
		p, err := policy.Parse(b[1])
		require.NoError(t, err, "%s", b[1])
		require.NoError(t, p.RunTests(nil), "%s", b[1])
	}
}

// The example of docs/toolsets.md parses, its tests pass, and its
// toolsets are those the page describes (the dispatcher's
// TestToolsetsPerModel runs it whole).
func TestDocsToolsetsExample(t *testing.T) {
	src, err := os.ReadFile("../../docs/toolsets.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(src, -1)
	require.Len(t, blocks, 2, "the policy, then a spec file (the dispatcher's TestSpecDefinitionsPerModelAndMode loads it)")
	require.True(t, bytes.HasPrefix(blocks[1][1], []byte("name: grep_lines\n")))
	p, err := policy.Parse(blocks[0][1])
	require.NoError(t, err)
	require.NoError(t, p.RunTests(nil))
	require.Equal(t, []string{"claude", "gpt"}, p.Toolsets())
	require.Equal(t, "gpt", p.ModelFamily("o3"))
	ok, _ := p.Toolset("gpt").Offered("edit")
	require.False(t, ok)
}
