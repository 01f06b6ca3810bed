package dispatchd

import (
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
