package policy_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

const limitsDoc = `tenant:
  default: allow
limits:
  - id: session-rate
    key: session
    rate: {count: 10, per: 1s, burst: 20}
  - id: repo-writes
    key: caller.agent + "/" + string(args.repo)
    tools: ["git_*"]
    concurrency: 2
    budget: {units: 500, window: 24h}
    cost: 'tool.name == "git_push" ? 5 : 1'
    reason: five hundred units a day per repository
`

// Limits parse with their defaults; a key and a cost may be CEL; an
// entry covers its tools' globs (every tool without tools).
func TestLimitsParse(t *testing.T) {
	p, err := policy.Parse([]byte(limitsDoc))
	require.NoError(t, err)
	ls := p.Limits()
	require.Len(t, ls, 2)
	repo, rate := ls[0], ls[1]
	require.Equal(t, "repo-writes", repo.ID)
	require.Equal(t, &policy.LimitRate{Count: 10, Per: time.Second, Burst: 20}, rate.Rate)
	require.True(t, rate.Covers("anything"))
	require.True(t, repo.Covers("git_push"))
	require.False(t, repo.Covers("echo"))
	require.Equal(t, 2, repo.Concurrency)
	require.Equal(t, &policy.LimitBudget{Units: 500, Window: 24 * time.Hour}, repo.Budget)
	require.Len(t, p.LimitsFor("git_push"), 2)
	require.Len(t, p.LimitsFor("echo"), 1)

	args, err := policy.ParseArgs([]byte(`{"repo":"toolwire"}`))
	require.NoError(t, err)
	in := &policy.Input{Tool: &toolwirev1.ToolSpec{Name: "git_push"}, Args: args,
		Caller: &toolwirev1.Caller{Tenant: "acme", Agent: "bot", Session: "s1"}}
	k, err := repo.KeyOf(in)
	require.NoError(t, err)
	require.Equal(t, "bot/toolwire", k)
	c, err := repo.CostOf(in)
	require.NoError(t, err)
	require.EqualValues(t, 5, c)
	k, err = rate.KeyOf(in)
	require.NoError(t, err)
	require.Equal(t, "s1", k)
	c, err = rate.CostOf(in)
	require.NoError(t, err)
	require.EqualValues(t, 1, c)

	// A key CEL cannot evaluate (no repo) is an error: admission refuses.
	in.Args, err = policy.ParseArgs([]byte(`{}`))
	require.NoError(t, err)
	_, err = repo.KeyOf(in)
	require.Error(t, err)

	// Limits are part of the version.
	other, err := policy.Parse([]byte(limitsDoc[:len(limitsDoc)-len("    reason: five hundred units a day per repository\n")]))
	require.NoError(t, err)
	require.NotEqual(t, p.Version(), other.Version())
	var none *policy.Policy
	require.Nil(t, none.LimitsFor("echo"))
}

// Bad entries are refused naming their line.
func TestLimitsRefused(t *testing.T) {
	for doc, want := range map[string]string{
		"limits:\n  - id: a\n    key: session\n":                                                                         "line 2: limits[0]: needs a rate, a concurrency or a budget",
		"limits:\n  - id: a\n    key: session\n    rate: {count: 0, per: 1s}\n":                                          "line 4: limits[0].rate.count: must be a whole number from 1",
		"limits:\n  - id: a\n    key: session\n    rate: {count: 1, per: 1ns}\n":                                         "line 4: limits[0].rate.per: must be a duration from 1ms",
		"limits:\n  - id: a\n    key: args.x ==\n    concurrency: 1\n":                                                   "line 3: limits[0].key: is not one of tenant",
		"limits:\n  - id: a\n    key: args.x > 1\n    concurrency: 1\n":                                                  "line 3: limits[0].key: is not one of tenant",
		"limits:\n  - id: a\n    key: session\n    concurrency: 2000\n":                                                  "line 4: limits[0].concurrency: at most 1024",
		"limits:\n  - id: a\n    key: session\n    budget: {units: 5, window: 1500ms}\n":                                 "limits[0].budget.window: must be whole seconds",
		"limits:\n  - id: a\n    key: session\n    rate: {count: 1, per: 1s}\n    cost: 3\n":                             "line 5: limits[0].cost: 3 is above the burst 1",
		"limits:\n  - id: a\n    key: session\n    concurrency: 1\n    frequency: 2\n":                                   "line 5: limits[0].frequency: unknown field",
		"tenant:\n  rules:\n    - {id: a, effect: allow, tools: [x]}\nlimits:\n  - {id: a, key: tool, concurrency: 1}\n": "line 5: limits[0].id: \"a\" is already used on line 3",
	} {
		_, err := policy.Parse([]byte(doc))
		require.ErrorIs(t, err, policy.ErrInvalid, doc)
		require.Contains(t, err.Error(), want, doc)
	}
}
