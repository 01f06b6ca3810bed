package registry_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/registry"
)

func TestSimilar(t *testing.T) {
	t.Parallel()
	names := []string{"echo", "fail", "remember", "sleep", "sha256", "grep_lines", "mcp__everything__echo", "mcp__everything__add"}
	require.Equal(t, []string{"echo"}, registry.Similar("ecoh", names))
	require.Equal(t, []string{"remember"}, registry.Similar("rememebr", names))
	require.Equal(t, []string{"grep_lines"}, registry.Similar("Grep-Lines", names))
	require.Equal(t, []string{"mcp__everything__add"}, registry.Similar("everything_add", names))
	require.Empty(t, registry.Similar("deploy_prod", names))
	require.Empty(t, registry.Similar("echo", []string{"echo"}), "the name itself is no suggestion")
}
