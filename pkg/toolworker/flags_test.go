package toolworker_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/pkg/toolworker"
)

// The worker's /healthz, /readyz and /metrics listen on loopback unless
// --http says otherwise (before, :9090, every interface).
func TestHTTPDefaultsToLoopback(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	require.Equal(t, 0, toolworker.MainArgs([]string{"-help"}, &stderr), stderr.String())
	require.Contains(t, stderr.String(), `(default "127.0.0.1:9090")`)
	require.NotContains(t, stderr.String(), `(default ":9090")`)
	require.Equal(t, "127.0.0.1:9090", toolworker.DefaultHTTPAddr)
}
