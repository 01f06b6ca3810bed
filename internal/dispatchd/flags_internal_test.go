package dispatchd

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// --pool-max-queue-wait reads a bound per pool, negative = none.
func TestParsePoolQueueWait(t *testing.T) {
	t.Parallel()
	m, err := parsePoolQueueWait(" sandbox=2m, mcp=500ms ,llm=-1s,")
	require.NoError(t, err)
	require.Equal(t, map[string]time.Duration{"sandbox": 2 * time.Minute, "mcp": 500 * time.Millisecond, "llm": -time.Second}, m)
}

// --mcp-profiles "" is the shipped profiles, as without the flag; a file
// is loaded.
func TestMCPProfilesEmptyIsShipped(t *testing.T) {
	t.Parallel()
	parse := func(args ...string) (RunConfig, error) {
		fs := flag.NewFlagSet("dispatcher", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var rc RunConfig
		var logLevel, sync string
		defineFlags(fs, &rc, &logLevel, &sync)
		return rc, fs.Parse(args)
	}
	rc, err := parse("--mcp-profiles", "")
	require.NoError(t, err)
	require.Nil(t, rc.MCPProfiles)
	rc, err = parse("--mcp-profiles", "../../docs/examples/profiles.yaml")
	require.NoError(t, err)
	require.NotNil(t, rc.MCPProfiles)
}
