package policy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"cel.dev/cel-go/cel"
	"github.com/stretchr/testify/require"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The cheap program (no cost tracking) runs only where CEL's static
// estimate proves the cost limit out of reach: for inputs as large as
// the condition's fastUpTo, the actual cost stays within the estimate
// and the limit, and past it the tracked program runs.
func TestCheapProgramIsWithinTheLimit(t *testing.T) {
	t.Parallel()
	env, err := celEnv()
	require.NoError(t, err)
	for _, src := range []string{
		`has(args.size) && args.size > 1000 && tool.annotations.destructive`,
		`caller.session.startsWith('blocked') || 'banned' in caller.scopes`,
		`args.path.matches('^/data/.*[.]csv$')`,
		`args.items.all(x, x.size() > 0)`,
		`args.exists(k, k.startsWith("x"))`,
		`args.path.split('/').size() > 3`,
		`args.path + args.path == "x"`,
		`args.path.lowerAscii().contains('secret')`,
		`args.items.map(x, x + x).exists(y, y == 'aa')`,
		`sets.contains(caller.scopes, ['admin'])`,
	} {
		c, ps := compileWhen(src)
		require.Nil(t, ps, src)
		require.Positive(t, c.fastUpTo, "%s is never cheap", src)
		ast, iss := env.Compile(src)
		require.NoError(t, iss.Err())
		measure, err := env.Program(ast, cel.EvalOptions(cel.OptTrackCost))
		require.NoError(t, err)
		est, err := env.EstimateCost(ast, sizeBound(c.fastUpTo))
		require.NoError(t, err)

		// The largest input of that size: one long string, a list of as
		// many one-character strings as fit, scopes as many as fit.
		n := c.fastUpTo
		var args *Args
		for k := n / 4; ; k -= k/8 + 1 {
			items := make([]string, k/2)
			for i := range items {
				items[i] = "a"
			}
			raw, err := json.Marshal(map[string]any{"path": strings.Repeat("/x", k/2), "items": items, "size": 5000})
			require.NoError(t, err)
			if len(raw) <= n {
				args, err = ParseArgs(raw)
				require.NoError(t, err)
				break
			}
		}
		scopes := make([]string, n/2)
		for i := range scopes {
			scopes[i] = "s"
		}
		in := &Input{Args: args, Caller: &toolwirev1.Caller{Session: strings.Repeat("s", n), Scopes: scopes}, Tool: &toolwirev1.ToolSpec{Name: "t"}}
		act := newActivation(in)
		require.LessOrEqual(t, act.maxSize(), n, src)
		_, det, err := measure.Eval(act)
		require.NoError(t, err, src)
		actual := *det.ActualCost()
		require.LessOrEqual(t, actual, est.Max, "%s: actual cost over the estimate", src)
		require.LessOrEqual(t, actual, uint64(CostLimit), src)
		t.Logf("%-70s fastUpTo=%6d estimate=%6d actual=%6d", src, n, est.Max, actual)

		// One size larger: the tracked program runs.
		big, err := ParseArgs([]byte(`{"path":"` + strings.Repeat("x", n+1) + `"}`))
		require.NoError(t, err)
		require.Greater(t, newActivation(&Input{Args: big, Tool: in.Tool}).maxSize(), c.fastUpTo)
	}
	c, ps := compileWhen(`args.items.all(x, args.items.all(y, x != y || true))`)
	require.Nil(t, ps)
	require.Zero(t, c.fastUpTo, "a nested loop over the arguments is always tracked")
	require.Nil(t, c.cheap)
}

// A condition nested deeper than MaxWhenDepth is refused at apply with the
// reason: nested literals type-check in time that grows faster than their
// depth (200 nested maps took 2 s), and every replica compiles every
// document in force (issue 28, finding 4).
func TestDeepConditionsAreRefused(t *testing.T) {
	t.Parallel()
	deep := func(n int) string {
		return "size(" + strings.Repeat("{'a':", n) + "1" + strings.Repeat("}", n) + ") > 0"
	}
	_, ps := compileWhen(deep(MaxWhenDepth - 2))
	require.Empty(t, ps, "as deep as allowed")
	for _, n := range []int{MaxWhenDepth, 200, 600} {
		_, ps := compileWhen(deep(n))
		require.NotEmpty(t, ps, n)
		require.Contains(t, ps[0].msg, "recursion limit", n)
	}
	_, err := Parse([]byte("tenant:\n  default: allow\n  rules:\n    - id: deep\n      effect: deny\n      when: \"" + deep(200) + "\"\n"))
	require.ErrorIs(t, err, ErrInvalid)
}

// The slowest condition a document may hold (nested map literals as deep
// as MaxWhenDepth allows) compiles in milliseconds: what bounds a
// document's compile time on every replica.
func BenchmarkCompileDeepestCondition(b *testing.B) {
	src := "size(" + strings.Repeat("{'a':", MaxWhenDepth-2) + "1" + strings.Repeat("}", MaxWhenDepth-2) + ") > 0"
	for b.Loop() {
		if _, ps := compileWhen(src); ps != nil {
			b.Fatal(ps)
		}
	}
}

// A document's CEL is bounded in all (MaxDocumentCELBytes), and refused
// before anything is compiled: many conditions each within the bounds
// add up (254 of 4 KiB took 50 s to compile on a loaded machine).
func TestDocumentCELIsBounded(t *testing.T) {
	t.Parallel()
	cond := "size(" + strings.Repeat("[", 20) + "1" + strings.Repeat("]", 20) + ") > 0 || args.x == '" + strings.Repeat("a", 3000) + "'"
	var b strings.Builder
	b.WriteString("tenant:\n  rules:\n")
	for i := 0; i*len(cond) <= MaxDocumentCELBytes; i++ {
		fmt.Fprintf(&b, "    - {id: r%d, effect: deny, tools: [echo], when: \"%s\"}\n", i, cond)
	}
	_, err := Parse([]byte(b.String()))
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), "its CEL (when, key and cost) totals")
}
