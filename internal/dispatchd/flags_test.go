package dispatchd_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatchd"
)

// The overload and storage flags refuse what they cannot read.
func TestOverloadFlagsAreChecked(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--pool-max-backlog", "sandbox"}, "want pool=N"},
		{[]string{"--pool-max-backlog", "sandbox=0"}, "want pool=N"},
		{[]string{"--pool-max-queue-wait", "sandbox=2"}, "want pool=DURATION"},
		{[]string{"--pool-max-queue-wait", "sandbox=50ms"}, "at least 100ms"},
		{[]string{"--pool-max-queue-wait", "=2m"}, "want pool=DURATION"},
		{[]string{"--stream-max-bytes", "results=1GB"}, "KiB, MiB, GiB or TiB"},
		{[]string{"--stream-max-bytes", "audit=1GiB"}, `no store "audit"`},
		{[]string{"--approval-ttl", "soon"}, "invalid value"},
		{[]string{"--mcp-profiles", "/nonexistent/profiles.yaml"}, "no such file"},
		{[]string{"--mcp-profiles", "../../docs/examples/policy-starter.yaml"}, "unknown field"},
	} {
		var stderr bytes.Buffer
		require.Equal(t, 2, dispatchd.Main(tt.args, &stderr, nil), tt.args)
		require.Contains(t, stderr.String(), tt.want)
	}
}
