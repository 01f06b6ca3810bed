//go:build linux

package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/sandbox"
	"github.com/toolwire/toolwire/internal/testdeps"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

var (
	sharedOnce sync.Once
	shared     *sandbox.Executor
	sharedErr  error

	sharedNetOnce sync.Once
	sharedNet     *sandbox.Executor
	sharedNetErr  error
)

// setup returns the executor the tests share (New probes the host by
// starting a helper; one probe is enough). Close runs in TestMain.
func setup(t *testing.T) *sandbox.Executor {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = sandbox.New(sandbox.Config{}) })
	require.NoError(t, sharedErr)
	return shared
}

// setupNet returns a shared executor whose operator allowed network tools
// (HostNetwork), with egress to any port and to loopback: the tests of
// network tools that are not about egress use it. Close runs in TestMain.
func setupNet(t *testing.T) *sandbox.Executor {
	t.Helper()
	all := make([]uint16, 0, 65535)
	for p := 1; p <= 65535; p++ {
		all = append(all, uint16(p))
	}
	sharedNetOnce.Do(func() {
		sharedNet, sharedNetErr = sandbox.New(sandbox.Config{HostNetwork: true, EgressPorts: all,
			EgressAllowNetworks: []string{"127.0.0.0/8", "::1/128"}})
	})
	require.NoError(t, sharedNetErr)
	return sharedNet
}

// need fails (with CI=true) or skips the test when the host lacks a
// mechanism it relies on.
func need(t *testing.T, e *sandbox.Executor, mechs ...string) {
	t.Helper()
	for _, m := range mechs {
		if slices.Contains(e.IsolationGaps(), m) {
			testdeps.Missing(t, "", "isolation mechanism %q is missing on this host", m)
		}
	}
}

// spec is a sandbox tool spec; opts adjust its SandboxConfig.
func spec(argv []string, opts ...func(*toolwirev1.SandboxConfig)) *toolwirev1.ToolSpec {
	sc := &toolwirev1.SandboxConfig{Argv: argv, ReadOnlyPaths: []string{fixtureBin}}
	for _, o := range opts {
		o(sc)
	}
	return &toolwirev1.ToolSpec{Name: "t", Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX,
		Config: &toolwirev1.ToolSpec_Sandbox{Sandbox: sc}}
}

func fixture(mode string, rest ...string) []string {
	return append([]string{fixtureBin, mode}, rest...)
}

func withLimits(l *toolwirev1.SandboxLimits) func(*toolwirev1.SandboxConfig) {
	return func(sc *toolwirev1.SandboxConfig) { sc.Limits = l }
}

func wall(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

func call(ctx context.Context, e *sandbox.Executor, s *toolwirev1.ToolSpec, args any) (*tool.Result, error) {
	var raw []byte
	switch a := args.(type) {
	case string:
		raw = []byte(a)
	default:
		raw, _ = json.Marshal(a)
	}
	return e.Execute(ctx, &executors.Request{
		Call: &toolwirev1.ToolCall{CallId: "c", Tool: s.GetName(), Arguments: raw, Attempt: 1},
		Spec: s,
	})
}

// text calls and returns the one text block, failing on an error.
func text(t *testing.T, e *sandbox.Executor, s *toolwirev1.ToolSpec, args any) string {
	t.Helper()
	res, err := call(t.Context(), e, s, args)
	require.NoError(t, err)
	require.Len(t, res.Content, 1)
	return res.Content[0].GetText().GetText()
}

// failure calls and returns the *tool.Error, failing on a result.
func failure(t *testing.T, e *sandbox.Executor, s *toolwirev1.ToolSpec, args any) *tool.Error {
	t.Helper()
	res, err := call(t.Context(), e, s, args)
	require.Error(t, err, "want an error, got %v", res)
	var te *tool.Error
	require.True(t, errors.As(err, &te), "want a *tool.Error, got %T %v", err, err)
	return te
}

// processesMatching lists pids whose command line starts with prefix.
func processesMatching(prefix string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.HasPrefix(string(b), prefix) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// stillWorks proves the executor still answers after a misbehaving tool.
func stillWorks(t *testing.T, e *sandbox.Executor) {
	t.Helper()
	require.Equal(t, `["--","still here"]`+"\n", text(t, e, spec(fixture("argv", "--", "{s}")), map[string]string{"s": "still here"}))
}
