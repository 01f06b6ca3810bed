package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/profiles"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Two pairs of 100 calls: every call answered, the runs in
// alternating order, the shaped calls spread over enough parents (each
// parent's children checked by GetDelegation), the parents released and
// drained, and the ratio stated.
func TestShapedMeasuresPlainAndShapedInPairs(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfg := testConfig(t)
	cfg.InFlight, cfg.Calls, cfg.Warmup = 8, 100, 4
	var progress strings.Builder
	// 16 children to a parent: the delegation step lists a parent's
	// children, and a test on a loaded machine keeps that list short.
	r, err := MeasureShaped(ctx, ShapedConfig{Config: cfg, Pairs: 2, ChildrenPerParent: 16}, &progress)
	require.NoError(t, err)
	require.Len(t, r.Plain, 2)
	require.Len(t, r.Shaped, 2)
	for i := range 2 {
		require.Equal(t, systemShapedPlain, r.Plain[i].System)
		require.Equal(t, systemShaped, r.Shaped[i].System)
		require.Equal(t, 100, r.Plain[i].Calls)
		require.Equal(t, 100, r.Shaped[i].Calls)
	}
	require.Equal(t, 2*(100+4), r.Delegated, "every shaped call, warm-up included, named a parent")
	require.Equal(t, 13, r.Parents, "208 children, 16 to a parent")
	require.Len(t, r.Ratios(), 2)
	require.Positive(t, r.MedianRatio())

	// Plain first, then the order alternates.
	lines := linesWith(progress.String(), "RESULT system=")
	require.Len(t, lines, 4)
	for i, want := range []string{systemShapedPlain, systemShaped, systemShaped, systemShapedPlain} {
		require.Contains(t, lines[i], "RESULT system="+want+" inflight=8 calls=100 ")
	}

	var out strings.Builder
	WriteShaped(&out, r)
	require.Contains(t, out.String(), "| pair | plain calls/s | shaped calls/s | shaped ÷ plain |")
	require.Contains(t, out.String(), "| median | ")
	require.Contains(t, out.String(), "With a profile, a toolset and a chain in force at 8 in flight: ")
	require.Contains(t, out.String(), "(median of 2 pairs' ratios; the goal is at least 0.9×)")
}

func linesWith(s, prefix string) []string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// What the shaped calls name is in force: the toolset's variant binds
// their arguments, the parent must be on its way, the profile must be a
// configured one, and a shaped call is its parent's child.
func TestShapedCallsAreShaped(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cfg := testConfig(t)
	cfg.Path, cfg.Calls, cfg.Warmup = PathHTTP, 100, -1 // one parent
	cfg = cfg.WithDefaults()
	e, err := startEnv(ctx, cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, e.close()) }()
	sh, err := startShaped(ctx, e, ShapedConfig{Config: cfg, Pairs: 1, ChildrenPerParent: MaxChildrenPerParent})
	require.NoError(t, err)
	require.Len(t, sh.parents, 1)
	defer func() { require.NoError(t, sh.stop(ctx)) }()
	call := func(req *toolwirev1.CallRequest, profile string) (*toolwirev1.CallResponse, error) {
		r := connect.NewRequest(req)
		if profile != "" {
			r.Header().Set(profiles.Header, profile)
		}
		resp, err := sh.s.client.Call(ctx, r)
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	}
	parent := sh.parents[0]

	require.NoError(t, sh.call(ctx))
	d, err := sh.s.client.GetDelegation(ctx, connect.NewRequest(&toolwirev1.GetDelegationRequest{CallId: parent}))
	require.NoError(t, err)
	require.Len(t, d.Msg.GetChildren(), 1)
	require.Equal(t, "echo", d.Msg.GetChildren()[0].GetTool())

	// The claude toolset's variant allows at most 1024 characters; echo's
	// own schema has no bound.
	long := `{"text":"` + strings.Repeat("x", 2000) + `"}`
	resp, err := call(shapedRequest(parent, long), shapedProfile)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, resp.GetResponse().GetError().GetType())
	require.Contains(t, resp.GetResponse().GetError().GetMessage(), "toolset "+shapedFamily)
	resp, err = call(&toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: long}, "")
	require.NoError(t, err)
	require.True(t, resp.GetResponse().GetOk(), "a plain call is not held to the variant")

	_, err = call(shapedRequest(parent, echoArgs), "no-such-profile")
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "the profile header is read: %v", err)

	// Once released, a parent takes no more children.
	require.NoError(t, sh.s.releaseParents(ctx, sh.parents))
	resp, err = call(shapedRequest(parent, echoArgs), shapedProfile)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CONFLICT, resp.GetResponse().GetError().GetType(), "%v", resp.GetResponse().GetError())
}

func TestShapedConfigRefusesWhatItCannotHonour(t *testing.T) {
	t.Parallel()
	base := ShapedConfig{Config: Config{Path: PathHTTP}.WithDefaults(), Pairs: 3, ChildrenPerParent: MaxChildrenPerParent}
	require.NoError(t, base.validate())
	for name, change := range map[string]func(*ShapedConfig){
		"Pairs":      func(sc *ShapedConfig) { sc.Pairs = -1 },
		"Children":   func(sc *ShapedConfig) { sc.ChildrenPerParent = MaxChildrenPerParent + 1 },
		"Policy":     func(sc *ShapedConfig) { sc.Policy = true },
		"Sessions":   func(sc *ShapedConfig) { sc.Sessions = true },
		"CPUProfile": func(sc *ShapedConfig) { sc.CPUProfile = "cpu.out" },
		"InFlight":   func(sc *ShapedConfig) { sc.InFlight = -1 },
	} {
		sc := base
		change(&sc)
		require.Error(t, sc.validate(), name)
	}
	// Every shaped call of every run has a parent with room for it.
	require.Equal(t, 1, ShapedConfig{Config: Config{Calls: 200, Warmup: -1}, Pairs: 1, ChildrenPerParent: 256}.parentsFor())
	require.Equal(t, 258, ShapedConfig{Config: Config{Calls: 20000, Warmup: 2000}, Pairs: 3, ChildrenPerParent: 256}.parentsFor())
	require.Equal(t, 4, ShapedConfig{Config: Config{Calls: 50, Warmup: 10}, Pairs: 1, ChildrenPerParent: 16}.parentsFor())

	var stderr strings.Builder
	require.Equal(t, 2, Main([]string{"-shaped", "-path", "nats"}, &strings.Builder{}, &stderr))
	require.Contains(t, stderr.String(), "-shaped measures the http path")
}
