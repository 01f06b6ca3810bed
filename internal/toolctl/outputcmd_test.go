package toolctl_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/toolctl"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// numbers returns "1\n2\n...n\n".
func numbers(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String()
}

// count prints numbers up to n; its output is limited to 100 lines.
var count = tool.Must(tool.New("count", func(_ context.Context, in struct {
	N int `json:"n"`
}) (string, error) {
	return numbers(in.N), nil
}, tool.Idempotent(), tool.WithLimits(&toolwirev1.Limits{MaxOutputBytes: 4096, MaxOutputLines: 100})))

// 'call' prints what the tool's limits let inline and says how to read
// the rest; 'output' reads it by range, to the end, and by pattern.
func TestOutput(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{Tools: append(builtin.Tools(), count)})
	out := b.run(t, "call", "count", `{"n":50000}`)
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	require.Equal(t, 100, strings.Count(out.stdout, "\n"), "99 lines and the marker")
	require.True(t, strings.HasPrefix(out.stdout, "1\n2\n3\n"))
	id := regexp.MustCompile(`call: ([0-9A-Z]{26})`).FindStringSubmatch(out.stderr)[1]
	require.Contains(t, out.stderr, "note: the output was truncated to the tool's limits; read all of it with: toolctl output "+id)

	full := numbers(50000)
	out = b.run(t, "output", id, "--offset", "10", "--limit", "20")
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	require.Equal(t, full[10:30], out.stdout)
	require.Contains(t, out.stderr, fmt.Sprintf("read on with: toolctl output %s --offset 30", id))

	out = b.run(t, "output", id, "--all")
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	require.Equal(t, full, out.stdout, "the whole output, page after page")
	require.Empty(t, out.stderr)

	out = b.run(t, "output", id, "--grep", "^4999[0-9]$")
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	require.Equal(t, "49990:49990\n49991:49991\n49992:49992\n49993:49993\n49994:49994\n49995:49995\n49996:49996\n49997:49997\n49998:49998\n49999:49999\n", out.stdout)

	out = b.run(t, "-o", "json", "output", id, "--limit", "4")
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	require.Contains(t, out.stdout, `"text":"1\n2\n"`)
	require.Contains(t, out.stdout, `"truncated":true`)

	out = b.run(t, "output", id, "--grep", "(")
	require.Equal(t, toolctl.ExitToolError, out.code, "the dispatcher's answer")
	require.Contains(t, out.stderr, "invalid pattern")

	out = b.run(t, "output", "01J00000000000000000000009")
	require.Equal(t, toolctl.ExitToolError, out.code)
	require.Contains(t, out.stderr, "error: NOT_FOUND")
}
