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
		"limits:\n  - id: a\n    key: session\n    rate: {count: 1, per: 1s}\n    wait: 1s\n":                            "line 5: limits[0].wait: is the wait for a concurrency slot: it needs a concurrency",
		"limits:\n  - id: a\n    key: session\n    concurrency: 1\n    wait: 1m\n":                                       "line 5: limits[0].wait: at most 30s",
		"tenant:\n  rules:\n    - {id: a, effect: allow, tools: [x]}\nlimits:\n  - {id: a, key: tool, concurrency: 1}\n": "line 5: limits[0].id: \"a\" is already used at line 3",
		// Limits that can never admit a call (issue 28): a cost of 0 (quoted,
		// or a CEL int that is the same for every call), above the budget.
		"limits:\n  - id: a\n    key: session\n    budget: {units: 5, window: 1h}\n    cost: \"0\"\n":     "limits[0].cost: every call costs 0, outside 1..",
		"limits:\n  - id: a\n    key: session\n    budget: {units: 5, window: 1h}\n    cost: \"3 - 3\"\n": "limits[0].cost: every call costs 0, outside 1..",
		"limits:\n  - id: a\n    key: session\n    budget: {units: 5, window: 1h}\n    cost: 6\n":         "limits[0].cost: 6 is above the budget's 5 units: no call would ever be admitted",
		"limits:\n  - id: a\n    key: session\n    rate: {count: 2, per: 1s}\n    cost: \"1 + 2\"\n":      "limits[0].cost: 3 is above the burst 2",
	} {
		_, err := policy.Parse([]byte(doc))
		require.ErrorIs(t, err, policy.ErrInvalid, doc)
		require.Contains(t, err.Error(), want, doc)
	}
}

// The loop guard: defaults without the section, thresholds in order,
// exemptions by glob, off when disabled; the fingerprint ignores key
// order, number forms and white space.
func TestLoopGuardParse(t *testing.T) {
	p, err := policy.Parse([]byte("tenant:\n  default: allow\n"))
	require.NoError(t, err)
	g := p.LoopGuard()
	require.NotNil(t, g, "on by default in every document")
	require.Equal(t, policy.LoopGuard{Window: 10 * time.Minute, Warn: 3, Ask: 5, Deny: 10, Scope: "session"}, *g)

	p, err = policy.Parse([]byte("loop_guard:\n  warn: 2\n  ask: 0\n  deny: 4\n  window: 1m\n  scope: run\n  exempt: [poll_*]\n"))
	require.NoError(t, err)
	g = p.LoopGuard()
	require.Equal(t, 2, g.Warn)
	require.Equal(t, 0, g.Ask)
	require.Equal(t, 4, g.Deny)
	require.Equal(t, "run", g.Scope)
	require.False(t, g.Guards("poll_status"))
	require.True(t, g.Guards("echo"))

	p, err = policy.Parse([]byte("loop_guard: {enabled: false}\n"))
	require.NoError(t, err)
	require.Nil(t, p.LoopGuard())
	var none *policy.Policy
	require.Nil(t, none.LoopGuard(), "no policy, no guard")

	for doc, want := range map[string]string{
		"loop_guard:\n  warn: 5\n  ask: 5\n":    "line 3: loop_guard.ask: 5 must be above warn (5)",
		"loop_guard:\n  deny: 2\n":              "loop_guard.deny: 2 must be above ask (5)",
		"loop_guard:\n  scope: turn\n":          "line 2: loop_guard.scope: must be session, run or chain",
		"loop_guard:\n  exempt: [\"[\"]\n":      "line 2: loop_guard.exempt[0]",
		"loop_guard:\n  warn: -1\n":             "line 2: loop_guard.warn: must be from 0",
		"agents:\n  bot:\n    loop_guard: {}\n": "line 3: agents.bot.loop_guard: unknown field",
	} {
		_, err := policy.Parse([]byte(doc))
		require.ErrorIs(t, err, policy.ErrInvalid, doc)
		require.Contains(t, err.Error(), want, doc)
	}

	a, err := policy.Fingerprint("echo", []byte(`{"a":1,"b":[2.0, "x"]}`))
	require.NoError(t, err)
	for _, same := range []string{`{"b":[2,"x"],"a":1.0}`, "{ \"b\" : [ 2e0 , \"x\" ] ,\n \"a\" : 10e-1 }"} {
		b, err := policy.Fingerprint("echo", []byte(same))
		require.NoError(t, err)
		require.Equal(t, a, b, same)
	}
	other, err := policy.Fingerprint("echo2", []byte(`{"a":1,"b":[2.0, "x"]}`))
	require.NoError(t, err)
	require.NotEqual(t, a, other)
	_, err = policy.Fingerprint("echo", []byte(`{"a":1,"a":2}`))
	require.Error(t, err, "duplicate keys are not one call")
}
