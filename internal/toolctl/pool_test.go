package toolctl_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/toolctl"
)

// toolctl pool pause, list and resume: the pause is recorded with who
// paused the pool and why, and shown by pool list; a call meanwhile is
// refused OVERLOADED naming the pause; resumed, calls run again.
func TestPoolPauseListResume(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})

	// The reason is an admin's text: its terminal escapes are printed
	// as escapes, never sent to the terminal.
	out := b.run(t, "pool", "pause", "native", "--reason", "upstream \x1b[31mincident\u202e")
	require.Equal(t, 0, out.code, out.stderr)
	require.Contains(t, out.stdout, "paused pool native (by default/local at ")

	out = b.run(t, "pool", "list")
	require.Equal(t, 0, out.code, out.stderr)
	require.Regexp(t, `native\s+\d+\s+\d+\s+yes\s+default/local\s+\S+.*upstream incident`, strings.ReplaceAll(out.stdout, `\x1b[31m`, ""))
	require.Contains(t, out.stdout, `upstream \x1b[31mincident\u202e`)
	require.NotContains(t, out.stdout, "\x1b")
	require.NotContains(t, out.stdout, "\u202e")

	out = b.run(t, "call", "echo", `{"text":"x"}`)
	require.Equal(t, toolctl.ExitToolError, out.code, out.stdout+out.stderr)
	require.Contains(t, out.stdout+out.stderr, "pool native is paused by an administrator")

	out = b.run(t, "pool", "resume", "native")
	require.Equal(t, 0, out.code, out.stderr)
	out = b.run(t, "-o", "json", "pool", "list")
	require.Equal(t, 0, out.code, out.stderr)
	require.NotContains(t, out.stdout, `"paused"`)
	out = b.run(t, "call", "echo", `{"text":"x"}`)
	require.Equal(t, 0, out.code, out.stdout+out.stderr)

	out = b.run(t, "pool", "pause", "nosuch")
	require.Equal(t, toolctl.ExitToolError, out.code)
	require.Contains(t, out.stderr, "no such pool")
	long := strings.Repeat("a", 5000)
	out = b.run(t, "pool", "pause", long)
	require.Equal(t, toolctl.ExitToolError, out.code)
	require.Contains(t, out.stderr, "no such pool")
	require.Equal(t, 1, strings.Count(out.stderr, long), "named once, by the client (what was asked), not echoed by the server")
	require.Equal(t, 0, b.run(t, "pool", "pause", "native").code, "the dispatcher's connection is still up")
}

// A key without the "installation" scope can neither pause nor list the
// pools (a tenant's admin: pools serve every tenant).
func TestPoolPauseNeedsAnInstallationAdmin(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{Auth: keyAuth{key: "s3cret"}})
	for _, args := range [][]string{{"pool", "pause", "native"}, {"pool", "resume", "native"}, {"pool", "list"}} {
		out := run(t, nil, "", append([]string{"--server", b.stack.URL, "--api-key", "s3cret"}, args...)...)
		require.Equal(t, toolctl.ExitToolError, out.code, "%q: %s", args, out.stderr)
		require.Contains(t, out.stderr, "permission_denied", "%q", args)
	}
	p := b.stack.Dispatcher.Pools()
	require.NotEmpty(t, p)
	for _, ps := range p {
		require.True(t, ps.Pause == nil || !ps.Pause.Paused)
	}
}
