package policy_test

import (
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
