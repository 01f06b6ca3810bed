package toolctl_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/toolctl"
)

// toolctl usage shows each limit as it stands for the caller: the budget
// spent by its calls, what remains and when it resets; another agent's
// usage needs the admin scope.
func TestUsageCommand(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{Auth: policyAcmeKeys})
	o := b.policyAs(t, "admin", "policy", "apply", writePolicy(t, `limits:
  - id: daily
    key: agent
    budget: {units: 50, window: 24h}
  - id: per-session
    key: session
    rate: {count: 5, per: 1s, burst: 10}
    concurrency: 3
  - id: per-repo
    key: string(args.repo)
    tools: [git_*]
    concurrency: 1
`))
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	for range 3 {
		o = b.policyAs(t, "bot", "call", "echo", `{"text":"hi"}`)
		require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	}
	// A call's concurrency slot is released after its answer reaches the
	// caller (limitgate releases it in the background): poll until the
	// last call's slot is free.
	require.Eventually(t, func() bool {
		o = b.policyAs(t, "bot", "usage")
		return o.code == toolctl.ExitOK && regexp.MustCompile(`per-session +session +5/1s burst 10 +0 of 3 `).MatchString(o.stdout)
	}, 20*time.Second, 10*time.Millisecond, "the last call's slot is released: %s", o.stdout)
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	require.Regexp(t, `daily +agent=bot +- +- +3 of 50 per 24h0m0s +47 +\d{4}-\d\d-\d\dT00:00:00Z`, o.stdout)
	require.Regexp(t, `per-session +session +5/1s burst 10 +0 of 3 +- +- +-`, o.stdout)
	require.Regexp(t, `per-repo +\(per call\) +- +0 of 1`, o.stdout)

	o = b.policyAs(t, "bot", "usage", "--agent", "ops")
	require.Equal(t, toolctl.ExitToolError, o.code)
	require.Contains(t, o.stderr, `"admin" scope`)
	o = b.policyAs(t, "admin", "usage", "--agent", "bot")
	require.Equal(t, toolctl.ExitOK, o.code, o.stderr)
	require.Contains(t, o.stdout, "3 of 50")
}
