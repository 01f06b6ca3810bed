package toolctl_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/toolctl"
	"github.com/toolwire/toolwire/pkg/tool"
)

// submit queues a call with toolctl and returns its id.
func (b *bundle) submit(t *testing.T, tool, args string) string {
	t.Helper()
	out := b.run(t, "submit", tool, args)
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	return strings.TrimSpace(out.stdout)
}

func TestWatch(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})

	t.Run("Text", func(t *testing.T) {
		t.Parallel()
		id := b.submit(t, "sleep", `{"duration":"200ms","text":"woke"}`)
		out := b.run(t, "watch", id)
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		lines := strings.Split(strings.TrimSuffix(out.stdout, "\n"), "\n")
		require.GreaterOrEqual(t, len(lines), 4, out.stdout)
		require.Regexp(t, `(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\S+ ACCEPTED$`, out.stdout)
		require.Regexp(t, `(?m)^\S+ STARTED attempt=1 worker=\S+$`, out.stdout)
		require.Regexp(t, `^\S+ FINISHED attempt=1 worker=\S+ ok$`, lines[len(lines)-2], "FINISHED is the last event")
		require.Equal(t, "woke", lines[len(lines)-1], "then the result, as get prints it")
	})

	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		id := b.submit(t, "echo", `{"text":"hi"}`)
		out := b.run(t, "-o", "json", "watch", id)
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		lines := strings.Split(strings.TrimSuffix(out.stdout, "\n"), "\n")
		var types []string
		for _, line := range lines {
			var ev struct {
				CallID   string `json:"callId"`
				Type     string `json:"type"`
				Response *struct {
					OK bool `json:"ok"`
				} `json:"response"`
			}
			require.NoError(t, json.Unmarshal([]byte(line), &ev), "one object per line: %q", line)
			require.Equal(t, id, ev.CallID)
			types = append(types, ev.Type)
			if ev.Type == "CALL_EVENT_TYPE_FINISHED" {
				require.NotNil(t, ev.Response)
				require.True(t, ev.Response.OK)
			}
		}
		require.Contains(t, types, "CALL_EVENT_TYPE_ACCEPTED")
		require.Equal(t, "CALL_EVENT_TYPE_FINISHED", types[len(types)-1])
	})

	t.Run("ToolFailed", func(t *testing.T) {
		t.Parallel()
		id := b.submit(t, "fail", `{"type":"PERMANENT","message":"no luck"}`)
		out := b.run(t, "watch", id)
		require.Equal(t, toolctl.ExitToolError, out.code, "the exit status of get")
		require.Regexp(t, `(?m)^\S+ FINISHED attempt=1 worker=\S+ error=PERMANENT$`, out.stdout)
		require.Contains(t, out.stderr, "error: PERMANENT: no luck")

		out = b.run(t, "-o", "json", "watch", id)
		require.Equal(t, toolctl.ExitToolError, out.code)
		require.Contains(t, out.stdout, "ERROR_TYPE_PERMANENT")
	})

	t.Run("Rejected", func(t *testing.T) {
		t.Parallel()
		out := b.run(t, "-o", "json", "submit", "echo", `{"text":1}`)
		require.Equal(t, toolctl.ExitToolError, out.code)
		var sub struct {
			CallID string `json:"callId"`
		}
		require.NoError(t, json.Unmarshal([]byte(out.stdout), &sub))

		out = b.run(t, "watch", sub.CallID)
		require.Equal(t, toolctl.ExitToolError, out.code)
		require.Regexp(t, `(?m)^\S+ REJECTED error=VALIDATION: `, out.stdout)
		require.Contains(t, out.stderr, "error: VALIDATION: ")
	})

	t.Run("UnknownCall", func(t *testing.T) {
		t.Parallel()
		out := b.run(t, "watch", "01J00000000000000000000000")
		require.Equal(t, toolctl.ExitToolError, out.code)
		require.Empty(t, out.stdout)
		require.Contains(t, out.stderr, "error: NOT_FOUND")
	})
}

func TestCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})

	t.Run("Requested", func(t *testing.T) {
		t.Parallel()
		id := b.submit(t, "sleep", `{"duration":"30s"}`)
		out := b.run(t, "cancel", id, "--reason", "user gave up")
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		require.Equal(t, "REQUESTED\n", out.stdout)

		out = b.run(t, "get", id, "--wait", "30s")
		require.Equal(t, toolctl.ExitToolError, out.code)
		require.Contains(t, out.stderr, "error: CANCELLED: ")
		require.Contains(t, out.stderr, "user gave up")

		out = b.run(t, "cancel", id)
		require.Equal(t, toolctl.ExitOK, out.code, "cancelling late is harmless")
		require.Equal(t, "ALREADY_FINISHED\n", out.stdout)

		out = b.run(t, "-o", "json", "cancel", id)
		require.Equal(t, toolctl.ExitOK, out.code)
		require.JSONEq(t, `{"outcome":"CANCEL_OUTCOME_ALREADY_FINISHED"}`, out.stdout)
	})

	t.Run("UnknownCall", func(t *testing.T) {
		t.Parallel()
		out := b.run(t, "cancel", "01J00000000000000000000000")
		require.Equal(t, toolctl.ExitToolError, out.code)
		require.Equal(t, "UNKNOWN_CALL\n", out.stdout)
		require.Contains(t, out.stderr, "error: NOT_FOUND")

		out = b.run(t, "-o", "json", "cancel", "nope")
		require.Equal(t, toolctl.ExitToolError, out.code)
		require.JSONEq(t, `{"outcome":"CANCEL_OUTCOME_UNKNOWN_CALL"}`, out.stdout)
	})
}

// A call over its soft latency budget: watch shows the
// LATENCY_BUDGET_EXCEEDED event before FINISHED, and watch, get and call
// note the overrun on stderr (never a failure: the exit status is 0).
func TestWatchOverBudget(t *testing.T) {
	t.Parallel()
	nap := tool.Must(tool.New("nap", func(ctx context.Context, _ struct{}) (string, error) {
		tm := time.NewTimer(100 * time.Millisecond)
		defer tm.Stop()
		select {
		case <-tm.C:
			return "awake", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}, tool.WithLatencyBudget(time.Millisecond)))
	b := setup(t, dispatchtest.Options{Tools: append(builtin.Tools(), nap)})
	id := b.submit(t, "nap", `{}`)
	out := b.run(t, "watch", id)
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	lines := strings.Split(strings.TrimSuffix(out.stdout, "\n"), "\n")
	require.GreaterOrEqual(t, len(lines), 3, out.stdout)
	require.Regexp(t, `^\S+ LATENCY_BUDGET_EXCEEDED: took \S+, over its soft latency budget of 1ms \(spec\)$`, lines[len(lines)-3], out.stdout)
	require.Regexp(t, `^\S+ FINISHED attempt=1 worker=\S+ ok$`, lines[len(lines)-2])
	require.Equal(t, "awake", lines[len(lines)-1])
	note := regexp.MustCompile(`(?m)^note: took \S+, over its soft latency budget of 1ms \(spec\)$`)
	require.Regexp(t, note, out.stderr)

	out = b.run(t, "get", id)
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	require.Regexp(t, note, out.stderr)
	out = b.run(t, "call", "nap", `{}`)
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	require.Regexp(t, note, out.stderr)
	out = b.run(t, "call", "echo", `{"text":"hi"}`)
	require.NotContains(t, out.stderr, "latency budget")
}
