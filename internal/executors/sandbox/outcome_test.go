//go:build linux

package sandbox_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/executors/sandbox"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func TestSeccomp(t *testing.T) {
	t.Parallel()
	if runtime.GOARCH != "amd64" {
		t.Skip("the fixture's system call numbers are amd64's")
	}
	e := setup(t)
	need(t, e, sandbox.MechSeccomp, sandbox.MechUserNS)
	// EPERM = 1, ENOSYS = 38; kill(1, 0) reaches only the sandbox's own
	// init (itself), so it succeeds.
	require.Equal(t, "ptrace=1\nmount=1\nunshare=1\nkeyctl=1\nbpf=1\nio_uring_setup=1\nclone3=38\n"+
		"socket_inet=1\nsocket_netlink=1\nsocket_unix=0\nkill_pid1=0\n",
		text(t, e, spec(fixture("syscalls")), `{}`))
	withNet := text(t, setupNet(t), spec(fixture("syscalls"), func(sc *toolwirev1.SandboxConfig) { sc.Network = true }), `{}`)
	require.Contains(t, withNet, "socket_inet=0\n", "network on allows every socket family")
	require.Contains(t, withNet, "ptrace=1\n")
}

func TestOutcomes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	jsonOut := func(sc *toolwirev1.SandboxConfig) { sc.JsonOutput = true }

	t.Run("exit codes carry the end of stderr", func(t *testing.T) {
		t.Parallel()
		te := failure(t, e, spec(fixture("fail", "--", "{type}")), `{"type":"permanent"}`)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, te.Type)
		require.Equal(t, "exit code 1: failing as permanent", te.Message)
		te = failure(t, e, spec(fixture("fail", "--", "{type}"), func(sc *toolwirev1.SandboxConfig) {
			sc.ExitCodes = map[int32]toolwirev1.ErrorType{75: toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT}
		}), `{"type":"transient"}`)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, te.Type)
		require.True(t, te.Retryable)
	})
	t.Run("json output that is not JSON", func(t *testing.T) {
		t.Parallel()
		te := failure(t, e, spec(fixture("big", "--", "{n}"), jsonOut), `{"n":3}`)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, te.Type)
		require.Contains(t, te.Message, "json_output: stdout is not JSON")
	})
	t.Run("json output over the output limit", func(t *testing.T) {
		t.Parallel()
		te := failure(t, e, spec(fixture("flood"), jsonOut, withLimits(&toolwirev1.SandboxLimits{OutputBytes: 1000})), `{}`)
		require.Contains(t, te.Message, "output limit of 1000 bytes exceeded")
	})
	t.Run("structured output and intents", func(t *testing.T) {
		t.Parallel()
		res, err := call(t.Context(), e, spec(fixture("intents"), jsonOut, func(sc *toolwirev1.SandboxConfig) { sc.IntentsField = "intents" }), `{}`)
		require.NoError(t, err)
		require.JSONEq(t, `{"ok":true}`, string(res.Structured), "the intents field is taken out")
		require.Equal(t, `{"ok":true}`, res.Content[0].GetText().GetText())
		require.Len(t, res.Intents, 2)
		require.Equal(t, "i1", res.Intents[0].Id)
		require.Equal(t, "toolwire.test.first", res.Intents[0].Type)
		require.JSONEq(t, `{"n":1}`, res.Intents[0].PayloadJson)
		require.Equal(t, "i2", res.Intents[1].Id)
	})
	t.Run("a program that does not exist", func(t *testing.T) {
		t.Parallel()
		te := failure(t, e, spec([]string{"/nonexistent/tool"}), `{}`)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, te.Type)
		require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, te.SideEffects)
		require.Contains(t, te.Message, "exec /nonexistent/tool: no such file or directory")
	})
	t.Run("a spec without sandbox config", func(t *testing.T) {
		t.Parallel()
		te := failure(t, e, &toolwirev1.ToolSpec{Name: "x"}, `{}`)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, te.Type)
		require.Contains(t, te.Message, "no sandbox config")
	})
}
