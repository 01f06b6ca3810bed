package toolctl_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/toolctl"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// flakyTool fails every attempt with a retryable error; after its two
// attempts the worker answers MAX_ATTEMPTS and writes a dead letter.
var flakyTool = tool.Must(tool.New("flaky", func(context.Context, json.RawMessage) (string, error) {
	return "", tool.Transient(errors.New("upstream down"))
}, tool.Idempotent(), tool.WithRetryPolicy(&toolwirev1.RetryPolicy{MaxAttempts: 2, InitialInterval: durationpb.New(time.Millisecond)})))

// dlq runs a toolctl dlq command against the bundle's NATS server.
func (b *bundle) dlq(t *testing.T, args ...string) outcome {
	t.Helper()
	return run(t, map[string]string{"TOOLWIRE_NATS_URL": b.stack.Env.URL}, "", append([]string{"dlq"}, args...)...)
}

var rowRe = regexp.MustCompile(`(?m)^(\d+)\s+(\S+)\s+flaky\s+([0-9A-Z]{26})\s+2\s+attempts exhausted \(TRANSIENT: upstream down\)$`)

func TestDLQ(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{Tools: []*tool.Tool{flakyTool}})

	out := b.run(t, "call", "flaky", `{"n":12345678901234567890}`)
	require.Equal(t, toolctl.ExitToolError, out.code, out.stderr)
	require.Contains(t, out.stderr, "error: MAX_ATTEMPTS: ")

	// The worker wrote the dead letter before it answered; poll anyway.
	var row []string
	deadline := time.Now().Add(10 * time.Second)
	for row == nil {
		out = b.dlq(t, "list")
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		row = rowRe.FindStringSubmatch(out.stdout)
		require.False(t, row == nil && time.Now().After(deadline), "no dead letter listed:\n%s", out.stdout)
	}
	require.True(t, strings.HasPrefix(out.stdout, "SEQ "), out.stdout)
	seq, deadID := row[1], row[3]

	t.Run("ListJSON", func(t *testing.T) {
		out := b.dlq(t, "-o", "json", "list", "--tool", "flaky", "--limit", "1")
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		var got struct {
			Seq        uint64 `json:"seq"`
			Subject    string `json:"subject"`
			DeadLetter struct {
				Call struct {
					CallID string `json:"callId"`
				} `json:"call"`
				Reason string `json:"reason"`
			} `json:"deadLetter"`
		}
		require.NoError(t, json.Unmarshal([]byte(out.stdout), &got), out.stdout)
		require.Equal(t, seq, jsonNumber(got.Seq))
		require.Equal(t, "toolwire.dlq.native.default.builtin.flaky", got.Subject)
		require.Equal(t, deadID, got.DeadLetter.Call.CallID)
		require.Equal(t, "attempts exhausted", got.DeadLetter.Reason)

		out = b.dlq(t, "list", "--tool", "echo")
		require.Equal(t, toolctl.ExitOK, out.code)
		require.Equal(t, 1, strings.Count(out.stdout, "\n"), "only the header: %s", out.stdout)
	})

	t.Run("Show", func(t *testing.T) {
		out := b.dlq(t, "show", seq)
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		dl := &toolwirev1.DeadLetter{}
		require.NoError(t, protojson.Unmarshal([]byte(out.stdout), dl))
		require.Equal(t, deadID, dl.GetCall().GetCallId())
		require.Equal(t, int32(2), dl.GetAttempts())
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, dl.GetLastError().GetType())
		require.Equal(t, "arguments: {\"n\":12345678901234567890}\n", out.stderr, "the exact argument bytes")

		out = b.dlq(t, "show", "999999")
		require.Equal(t, toolctl.ExitToolError, out.code)
		require.Contains(t, out.stderr, "no such dead letter")
	})

	t.Run("Retry", func(t *testing.T) {
		out := b.dlq(t, "retry", seq)
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		newID := strings.TrimSpace(out.stdout)
		require.Len(t, newID, 26, "a ULID")
		require.NotEqual(t, deadID, newID)

		// The new call is known to the dispatcher and runs to a terminal
		// result: it fails the same way, into the DLQ again.
		out = b.run(t, "-o", "json", "get", newID, "--wait", "30s")
		require.Equal(t, toolctl.ExitToolError, out.code, out.stderr)
		var got struct {
			State    string `json:"state"`
			Response struct {
				Error struct{ Type string } `json:"error"`
			} `json:"response"`
		}
		require.NoError(t, json.Unmarshal([]byte(out.stdout), &got))
		require.Equal(t, "CALL_STATE_DONE", got.State)
		require.Equal(t, "ERROR_TYPE_MAX_ATTEMPTS", got.Response.Error.Type)

		out = b.dlq(t, "-o", "json", "retry", seq)
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		var sub struct {
			CallID string `json:"callId"`
		}
		require.NoError(t, json.Unmarshal([]byte(out.stdout), &sub))
		require.Len(t, sub.CallID, 26)
	})

	t.Run("RawRecordIsNotRetryable", func(t *testing.T) {
		env := b.stack.Env
		data, err := proto.Marshal(&toolwirev1.DeadLetter{Raw: []byte("\xffgarbage"), Reason: "undecodable call"})
		require.NoError(t, err)
		ack, err := env.Bus.JS.Publish(t.Context(), env.Bus.Subjects.DLQ(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, "_unknown", "_unknown", "_unknown"), data)
		require.NoError(t, err)

		out := b.dlq(t, "retry", jsonNumber(ack.Sequence))
		require.Equal(t, toolctl.ExitToolError, out.code)
		require.Empty(t, out.stdout)
		require.Contains(t, out.stderr, "holds no decodable call")

		out = b.dlq(t, "list")
		require.Regexp(t, `(?m)^`+jsonNumber(ack.Sequence)+`\s+\S+\s+_unknown\s+-\s+0\s+undecodable call$`, out.stdout)
	})
}

func jsonNumber(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestDLQConnection(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{NoWorker: true})

	t.Run("Flags", func(t *testing.T) {
		t.Parallel()
		out := run(t, nil, "", "dlq", "list", "--nats-url", b.stack.Env.URL, "--prefix", "toolwire")
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		require.Equal(t, "SEQ  TIME  TOOL  CALL ID  ATTEMPTS  REASON\n", out.stdout, "an empty DLQ")
	})

	t.Run("WrongPrefix", func(t *testing.T) {
		t.Parallel()
		out := run(t, map[string]string{"TOOLWIRE_NATS_URL": b.stack.Env.URL, "TOOLWIRE_PREFIX": "other"}, "", "dlq", "list")
		require.Equal(t, toolctl.ExitUsage, out.code)
		require.Contains(t, out.stderr, "OTHER_DLQ not found")
		require.Contains(t, out.stderr, "Set --prefix or TOOLWIRE_PREFIX")
	})

	t.Run("Unreachable", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		url := "nats://" + ln.Addr().String()
		require.NoError(t, ln.Close())

		out := run(t, nil, "", "dlq", "show", "1", "--nats-url", url)
		require.Equal(t, toolctl.ExitUsage, out.code)
		require.Contains(t, out.stderr, ln.Addr().String())
		require.Contains(t, out.stderr, "Is NATS serving there?")
	})

	t.Run("Usage", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{
			{"dlq", "show"},
			{"dlq", "show", "x"},
			{"dlq", "retry", "0"},
			{"dlq", "list", "--limit", "-1"},
			{"dlq", "list", "extra"},
			{"dlq", "list", "--prefix", "not a prefix"},
		} {
			out := run(t, map[string]string{"TOOLWIRE_NATS_URL": b.stack.Env.URL}, "", args...)
			require.Equal(t, toolctl.ExitUsage, out.code, "%q: %s", args, out.stderr)
			require.Contains(t, out.stderr, "--help", "%q", args)
		}
	})
}

type secretIn struct {
	User  string `json:"user"`
	Token string `json:"token" toolwire:"secret"`
}

const dlqCanary = "dlq-canary-61c2e8f0"

// TestDLQRedactsSecrets: dlq list and show print a dead letter of a tool
// with a secret argument as audit does: the field redacted, its value
// replaced in the reason and last error, also in a letter written before
// workers redacted them; the raw bytes of an undecodable call withheld.
func TestDLQRedactsSecrets(t *testing.T) {
	t.Parallel()
	leaky := tool.Must(tool.New("leaky", func(_ context.Context, in secretIn) (string, error) {
		return "", tool.Transient(errors.New("upstream refused token " + in.Token))
	}, tool.Idempotent(), tool.WithRetryPolicy(&toolwirev1.RetryPolicy{MaxAttempts: 2, InitialInterval: durationpb.New(time.Millisecond)})))
	b := setup(t, dispatchtest.Options{Tools: []*tool.Tool{leaky}})
	args := `{"user":"ann","token":"` + dlqCanary + `"}`
	out := b.run(t, "call", "leaky", args)
	require.Equal(t, toolctl.ExitToolError, out.code, out.stderr)
	require.NotContains(t, out.stdout+out.stderr, dlqCanary)

	// A letter as an older worker wrote it: reason and error in clear.
	env := b.stack.Env
	spec, err := b.stack.Registry.Get("leaky")
	require.NoError(t, err)
	old := &toolwirev1.DeadLetter{Reason: "refused " + dlqCanary, Attempts: 1,
		LastError: &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, Message: "'" + dlqCanary + "' does not match"},
		Call: &toolwirev1.ToolCall{CallId: "01OLDLETTER0000000000000000", Tool: "leaky", SpecVersion: spec.Spec.Version,
			Arguments: []byte(args), Caller: &toolwirev1.Caller{Tenant: "default"}}}
	raw, err := proto.Marshal(&toolwirev1.ToolCall{Tool: "leaky", Arguments: []byte(args)}) // no call id: undecodable
	require.NoError(t, err)
	for _, dl := range []*toolwirev1.DeadLetter{old, {Raw: raw, Reason: "undecodable call"}} {
		data, err := proto.Marshal(dl)
		require.NoError(t, err)
		_, err = env.Bus.JS.Publish(t.Context(), env.Bus.Subjects.DLQ(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, "default", "builtin", "leaky"), data)
		require.NoError(t, err)
	}

	var list outcome
	deadline := time.Now().Add(10 * time.Second)
	for {
		list = b.dlq(t, "list")
		require.Equal(t, toolctl.ExitOK, list.code, list.stderr)
		if strings.Count(list.stdout, "\n") == 4 { // the header and three letters
			break
		}
		require.False(t, time.Now().After(deadline), "letters missing:\n%s", list.stdout)
	}
	jsonList := b.dlq(t, "-o", "json", "list")
	require.Equal(t, toolctl.ExitOK, jsonList.code, jsonList.stderr)
	require.Contains(t, jsonList.stdout, `"rawBytesWithheld":`)
	seen := []string{list.stdout, list.stderr, jsonList.stdout, jsonList.stderr}
	for _, line := range regexp.MustCompile(`(?m)^(\d+)\s`).FindAllStringSubmatch(list.stdout, -1) {
		for _, o := range []string{"text", "json"} {
			show := b.dlq(t, "-o", o, "show", line[1])
			require.Equal(t, toolctl.ExitOK, show.code, show.stderr)
			seen = append(seen, show.stdout, show.stderr)
		}
	}
	all := strings.Join(seen, "\n")
	require.Contains(t, all, "[REDACTED]")
	require.Contains(t, all, `arguments: {"token":"[REDACTED]","user":"ann"}`, "the other fields are shown")
	require.Contains(t, all, "raw: ")
	for _, s := range seen {
		require.NotContains(t, s, dlqCanary)
		require.NotContains(t, s, base64.StdEncoding.EncodeToString([]byte(args)), "nor base64-encoded")
	}
}

// deadLetterIn calls flaky in session and returns the sequence of its
// dead letter.
func (b *bundle) deadLetterIn(t *testing.T, session, n string) string {
	t.Helper()
	out := b.run(t, "call", "flaky", `{"n":`+n+`}`, "--session", session)
	require.Equal(t, toolctl.ExitToolError, out.code, out.stderr)
	re := regexp.MustCompile(`(?m)^(\d+)\s+\S+\s+flaky\s+[0-9A-Z]{26}\s`)
	var seq string
	deadline := time.Now().Add(30 * time.Second)
	for seq == "" {
		out = b.dlq(t, "list", "--limit", "1")
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		if m := re.FindStringSubmatch(out.stdout); m != nil && strings.Contains(b.dlq(t, "show", m[1]).stderr, n) {
			seq = m[1]
		}
		require.False(t, seq == "" && time.Now().After(deadline), "no dead letter of n=%s listed:\n%s", n, out.stdout)
	}
	return seq
}

// `toolctl dlq retry` of a call whose session has ended is refused
// SESSION_INACTIVE, and of a call the session's mode now forbids
// MODE_RESTRICTED, by the dispatcher that serves the retry: exit 1, and
// nothing is queued (the calls stream's last sequence is unchanged).
func TestDLQRetryIsDecidedAsAnApproval(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{Tools: []*tool.Tool{flakyTool}})
	b.stack.ApplyPolicy(t, "tenant:\n  default: allow\nmodes:\n  voice:\n    rules:\n"+
		"      - {id: voice-no-flaky, effect: deny, tools: [flaky], reason: not during a call}\n")
	ended := b.deadLetterIn(t, "s-ended", "111")
	moded := b.deadLetterIn(t, "s-voice", "222")
	b.stack.EndSession(t, "s-ended", "the caller hung up")
	b.stack.SetMode(t, "s-voice", "voice")
	before, err := b.stack.Env.Bus.Calls.Info(t.Context())
	require.NoError(t, err)

	out := b.dlq(t, "retry", ended)
	require.Equal(t, toolctl.ExitToolError, out.code, out.stderr)
	require.Empty(t, out.stdout)
	require.Contains(t, out.stderr, "nothing was queued")
	require.Contains(t, out.stderr, "SESSION_INACTIVE")
	require.Contains(t, out.stderr, "the caller hung up")

	out = b.dlq(t, "retry", moded)
	require.Equal(t, toolctl.ExitToolError, out.code, out.stderr)
	require.Empty(t, out.stdout)
	require.Contains(t, out.stderr, "MODE_RESTRICTED")
	require.Contains(t, out.stderr, "voice-no-flaky")

	after, err := b.stack.Env.Bus.Calls.Info(t.Context())
	require.NoError(t, err)
	require.Equal(t, before.State.LastSeq, after.State.LastSeq, "nothing was queued")

	b.stack.SetMode(t, "s-voice", "") // the mode no longer forbids it: the retry runs
	out = b.dlq(t, "retry", moded)
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	require.Len(t, strings.TrimSpace(out.stdout), 26, "a new call id")
}
