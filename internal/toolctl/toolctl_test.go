package toolctl_test

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/toolctl"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

// outcome is what one toolctl run printed and returned.
type outcome struct {
	stdout, stderr string
	code           int
}

// run runs toolctl in-process with args, stdin and environment env.
func run(t *testing.T, env map[string]string, stdin string, args ...string) outcome {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := toolctl.Run(t.Context(), args, toolctl.IO{
		Stdin: strings.NewReader(stdin), Stdout: &stdout, Stderr: &stderr,
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	})
	return outcome{stdout.String(), stderr.String(), code}
}

type bundle struct {
	stack *dispatchtest.Stack
}

func setup(t *testing.T, opts dispatchtest.Options) *bundle {
	t.Helper()
	return &bundle{stack: dispatchtest.Start(t, opts)}
}

// run runs toolctl against the bundle's dispatcher.
func (b *bundle) run(t *testing.T, args ...string) outcome {
	t.Helper()
	return run(t, nil, "", append([]string{"--server", b.stack.URL}, args...)...)
}

func TestCall(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		out := b.run(t, "call", "echo", `{"text":"hi"}`)
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		require.Equal(t, "hi\n", out.stdout)
		require.Regexp(t, `^call: [0-9A-Z]{26}\n$`, out.stderr, "the call id, for get, watch and session apply")
	})

	t.Run("UnknownIDsExitOneEverywhere", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{
			{"get", "01J00000000000000000000009"},
			{"session", "apply", "01J00000000000000000000009"},
		} {
			out := b.run(t, args...)
			require.Equal(t, toolctl.ExitToolError, out.code, "%v: %s", args, out.stderr)
		}
	})

	t.Run("ArgumentsFromStdin", func(t *testing.T) {
		t.Parallel()
		out := run(t, nil, "{\"text\":\"from stdin\"}\n", "--server", b.stack.URL, "call", "echo", "-")
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		require.Equal(t, "from stdin\n", out.stdout)
	})

	t.Run("SchemaViolation", func(t *testing.T) {
		t.Parallel()
		out := b.run(t, "call", "echo", `{"text":42}`)
		require.Equal(t, toolctl.ExitToolError, out.code)
		require.Empty(t, out.stdout)
		require.Contains(t, out.stderr, "error: VALIDATION: ")
		require.Contains(t, out.stderr, "\n  /text: ", "one line per offending field")
	})

	t.Run("EndedSession", func(t *testing.T) {
		t.Parallel()
		b.stack.EndSession(t, "s-end", "the user left")
		out := b.run(t, "call", "echo", `{"text":"hi"}`, "--session", "s-end")
		require.Equal(t, toolctl.ExitToolError, out.code)
		require.Empty(t, out.stdout)
		require.Contains(t, out.stderr, `error: SESSION_INACTIVE: session "s-end" has ended: the user left`)
	})

	t.Run("MissingArguments", func(t *testing.T) {
		t.Parallel()
		out := b.run(t, "call", "echo")
		require.Equal(t, toolctl.ExitToolError, out.code)
		require.Contains(t, out.stderr, "  /text: is required")
	})

	t.Run("UnknownTool", func(t *testing.T) {
		t.Parallel()
		out := b.run(t, "call", "nosuch", "{}")
		require.Equal(t, toolctl.ExitToolError, out.code)
		require.Contains(t, out.stderr, `error: NOT_FOUND: unknown tool "nosuch"`)
		require.Contains(t, out.stderr, "suggestion: ")
		require.Contains(t, out.stderr, "toolctl tools list", "the hint names the command, not the RPC")
		out = b.run(t, "call", "ecoh", "{}")
		require.Contains(t, out.stderr, "suggestion: did you mean echo? ")
	})

	t.Run("ToolFailed", func(t *testing.T) {
		t.Parallel()
		out := b.run(t, "call", "fail", `{"type":"PERMANENT","message":"no luck"}`)
		require.Equal(t, toolctl.ExitToolError, out.code)
		require.Contains(t, out.stderr, "error: PERMANENT: no luck")
	})

	t.Run("BadJSON", func(t *testing.T) {
		t.Parallel()
		for _, arg := range []string{`{"text":`, `hi`, ``} {
			out := b.run(t, "call", "echo", arg)
			require.Equal(t, toolctl.ExitUsage, out.code, "argument %q", arg)
			require.Contains(t, out.stderr, "not valid JSON")
			require.Empty(t, out.stdout)
		}
	})

	t.Run("JSONOutput", func(t *testing.T) {
		t.Parallel()
		out := b.run(t, "-o", "json", "call", "echo", `{"text":"hi"}`)
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		var got struct {
			CallID   string `json:"callId"`
			State    string `json:"state"`
			Response struct {
				OK      bool   `json:"ok"`
				Tool    string `json:"tool"`
				Content []struct {
					Text struct{ Text string } `json:"text"`
				} `json:"content"`
			} `json:"response"`
		}
		require.NoError(t, json.Unmarshal([]byte(out.stdout), &got), out.stdout)
		require.NotEmpty(t, got.CallID)
		require.Equal(t, "CALL_STATE_DONE", got.State)
		require.True(t, got.Response.OK)
		require.Equal(t, "hi", got.Response.Content[0].Text.Text)
		require.Contains(t, out.stdout, "\n  \"state\"", "multiline")

		out = b.run(t, "-o", "json", "call", "echo", `{}`)
		require.Equal(t, toolctl.ExitToolError, out.code, "the exit status still tells the outcome")
		require.True(t, json.Valid([]byte(out.stdout)))
		require.Contains(t, out.stdout, "ERROR_TYPE_VALIDATION")
	})
}

func TestSubmitAndGet(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})

	t.Run("Submit", func(t *testing.T) {
		t.Parallel()
		out := b.run(t, "submit", "echo", `{"text":"later"}`)
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		id := strings.TrimSpace(out.stdout)
		require.Len(t, id, 26, "a ULID")

		out = b.run(t, "get", id, "--wait", "30s")
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		require.Equal(t, "later\n", out.stdout)

		out = b.run(t, "-o", "json", "get", id)
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		require.True(t, json.Valid([]byte(out.stdout)))
		require.Contains(t, out.stdout, id)
	})

	t.Run("SubmitRejected", func(t *testing.T) {
		t.Parallel()
		out := b.run(t, "submit", "echo", `{"text":1}`)
		require.Equal(t, toolctl.ExitToolError, out.code)
		require.Empty(t, out.stdout)
		require.Contains(t, out.stderr, "error: VALIDATION")

		out = b.run(t, "-o", "json", "submit", "nosuch")
		require.Equal(t, toolctl.ExitToolError, out.code)
		require.Contains(t, out.stdout, "ERROR_TYPE_NOT_FOUND")
	})

	t.Run("Pending", func(t *testing.T) {
		t.Parallel()
		out := b.run(t, "call", "sleep", `{"duration":"500ms","text":"woke"}`, "--wait", "1ms")
		require.Equal(t, toolctl.ExitPending, out.code, out.stderr)
		id := strings.TrimSpace(out.stdout)
		require.Len(t, id, 26)
		require.Contains(t, out.stderr, "pending: call "+id)

		out = b.run(t, "get", id)
		require.Contains(t, []int{toolctl.ExitPending, toolctl.ExitOK}, out.code, "at once: pending unless the sleep already ended")

		out = b.run(t, "get", id, "--wait", "30s")
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		require.Equal(t, "woke\n", out.stdout)
	})

	t.Run("TimeoutReportsTheCall", func(t *testing.T) {
		t.Parallel()
		// The dispatcher is asked to wait a little less than --timeout and
		// answers PENDING in the headroom left (a tenth of the timeout,
		// 500ms here): with --timeout 300ms the headroom was 100ms, which
		// a loaded host could miss (exit 2, no answer).
		out := b.run(t, "--timeout", "5s", "-o", "json", "call", "sleep", `{"duration":"60s"}`)
		require.Equal(t, toolctl.ExitPending, out.code, out.stderr)
		require.Contains(t, out.stdout, "CALL_STATE_PENDING")
	})

	t.Run("UnknownCall", func(t *testing.T) {
		t.Parallel()
		out := b.run(t, "get", "01J00000000000000000000000")
		require.Equal(t, toolctl.ExitToolError, out.code)
		require.Contains(t, out.stderr, "error: NOT_FOUND")
	})
}

func TestTools(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})

	t.Run("List", func(t *testing.T) {
		t.Parallel()
		out := b.run(t, "tools", "list")
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		lines := strings.Split(strings.TrimSpace(out.stdout), "\n")
		require.Len(t, lines, 5, out.stdout)
		require.True(t, strings.HasPrefix(lines[0], "NAME"))
		require.Regexp(t, `^echo\s+native\s+[0-9a-f]{12}\s+Returns the given text unchanged\.$`, lines[1])
	})

	t.Run("ListJSON", func(t *testing.T) {
		t.Parallel()
		out := b.run(t, "tools", "list", "-o", "json", "--name", "ec*")
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		var got struct {
			Tools []struct{ Name string } `json:"tools"`
		}
		require.NoError(t, json.Unmarshal([]byte(out.stdout), &got))
		require.Len(t, got.Tools, 1)
		require.Equal(t, "echo", got.Tools[0].Name)
	})

	t.Run("ListByCategory", func(t *testing.T) {
		t.Parallel()
		out := b.run(t, "tools", "list", "-o", "json", "--category", "action")
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		var got struct {
			Tools []struct{ Name string } `json:"tools"`
		}
		require.NoError(t, json.Unmarshal([]byte(out.stdout), &got))
		require.Len(t, got.Tools, 1, out.stdout)
		require.Equal(t, "remember", got.Tools[0].Name, "the one action tool")

		out = b.run(t, "tools", "list", "--category", "nosuch")
		require.Equal(t, toolctl.ExitUsage, out.code, out.stderr)
		require.Contains(t, out.stderr, "want retrieval, action or utility")
	})

	t.Run("ListProviderFormats", func(t *testing.T) {
		t.Parallel()
		for _, f := range []string{"openai", "anthropic", "gemini", "mcp"} {
			out := b.run(t, "tools", "list", "--format", f, "--executor", "native")
			require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
			require.True(t, json.Valid([]byte(out.stdout)), f)
			require.Contains(t, out.stdout, `"echo"`, f)
		}
	})

	t.Run("Show", func(t *testing.T) {
		t.Parallel()
		out := b.run(t, "tools", "show", "echo")
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		require.Contains(t, out.stdout, "name:         echo\n")
		require.Contains(t, out.stdout, "input schema:\n")

		out = b.run(t, "tools", "show", "echo", "-o", "json")
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		var spec struct{ Name, Version string }
		require.NoError(t, json.Unmarshal([]byte(out.stdout), &spec))
		require.Equal(t, "echo", spec.Name)
		require.NotEmpty(t, spec.Version)

		out = b.run(t, "tools", "show", "echo", "--format", "anthropic")
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		require.True(t, json.Valid([]byte(out.stdout)))
	})

	t.Run("ShowUnknown", func(t *testing.T) {
		t.Parallel()
		out := b.run(t, "tools", "show", "nosuch")
		require.Equal(t, toolctl.ExitToolError, out.code)
		require.Contains(t, out.stderr, `error: NOT_FOUND: unknown tool "nosuch"`)
	})
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()

	for _, args := range [][]string{
		{"call"},
		{"call", "echo", "{}", "extra"},
		{"nope"},
		{"-o", "yaml", "tools", "list"},
		{"tools", "list", "--format", "cohere"},
		{"tools", "list", "--executor", "lambda"},
		{"tools", "show"},
		{"get", "x", "--wait", "-1s"},
		{"--timeout", "-1s", "tools", "list"},
		{"--server", "127.0.0.1:8080", "tools", "list"},
		{"call", "echo", "--no-such-flag"},
	} {
		out := run(t, nil, "", args...)
		require.Equal(t, toolctl.ExitUsage, out.code, "%q: %s", args, out.stderr)
		require.Contains(t, out.stderr, "--help", "%q", args)
		require.Empty(t, out.stdout, "%q", args)
	}

	out := run(t, nil, "", "--help")
	require.Equal(t, toolctl.ExitOK, out.code)
	require.Contains(t, out.stdout, "Exit status")
}

func TestUnreachableServer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())

	for _, args := range [][]string{{"call", "echo", `{"text":"hi"}`}, {"tools", "list"}, {"get", "01J00000000000000000000000"}} {
		out := run(t, map[string]string{"TOOLWIRE_SERVER": url}, "", args...)
		require.Equal(t, toolctl.ExitUsage, out.code, "%q", args)
		require.Contains(t, out.stderr, "unavailable")
		require.Contains(t, out.stderr, "Is a dispatcher serving at "+url)
	}
}

// keyAuth accepts one bearer key.
type keyAuth struct{ key string }

func (a keyAuth) Authenticate(r *http.Request) (identity.Identity, error) {
	if r.Header.Get("Authorization") != "Bearer "+a.key {
		return identity.Identity{}, identity.ErrUnauthenticated
	}
	return identity.Identity{Tenant: "acme", Agent: "toolctl", Scopes: []string{"*"}}, nil
}

func TestEnvironment(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{Auth: keyAuth{key: "s3cret"}})
	env := map[string]string{"TOOLWIRE_SERVER": b.stack.URL, "TOOLWIRE_API_KEY": "s3cret"}

	out := run(t, env, "", "call", "echo", `{"text":"hi"}`)
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	require.Equal(t, "hi\n", out.stdout)

	out = run(t, env, "", "--api-key", "guess", "call", "echo", `{"text":"hi"}`)
	require.Equal(t, toolctl.ExitUsage, out.code, "the flag wins over the environment")
	require.Contains(t, out.stderr, "unauthenticated")
	require.Contains(t, out.stderr, "--api-key")

	out = run(t, map[string]string{"TOOLWIRE_SERVER": "http://127.0.0.1:1"}, "", "--server", b.stack.URL, "--api-key", "s3cret", "tools", "list")
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	require.Contains(t, out.stdout, "echo")
}

// tools list --session leaves out the tools the session's mode forbids
// outright, in the table and in a provider's format; another session, or
// none, lists them.
func TestToolsListInSession(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})
	b.stack.ApplyPolicy(t, "tenant:\n  default: allow\nmodes:\n  voice:\n    rules:\n      - {id: voice-no-sleep, effect: deny, tools: [sleep]}\n")
	b.stack.SetMode(t, "s-voice", "voice")
	out := b.run(t, "tools", "list", "--session", "s-voice")
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	require.NotContains(t, out.stdout, "sleep")
	require.Contains(t, out.stdout, "echo")
	out = b.run(t, "tools", "list", "--session", "s-voice", "--format", "openai")
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	require.NotContains(t, out.stdout, `"sleep"`)
	require.Contains(t, out.stdout, `"echo"`)
	for _, args := range [][]string{{"--session", "s-other"}, {}} {
		out = b.run(t, append([]string{"tools", "list"}, args...)...)
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		require.Contains(t, out.stdout, "sleep", args)
	}
}

// tools list --model and call --model apply the toolset of the model's
// family (docs/toolsets.md).
func TestToolsPerModelFlags(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatchtest.Options{})
	b.stack.ApplyPolicy(t, "tenant: {default: allow}\ntoolsets:\n  gpt: {hide: [sleep]}\n")
	out := b.run(t, "tools", "list", "--model", "gpt-5.1")
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	require.NotContains(t, out.stdout, "sleep")
	require.Contains(t, out.stdout, "echo")
	out = b.run(t, "tools", "list", "--model", "claude-sonnet-4-5")
	require.Contains(t, out.stdout, "sleep")
	out = b.run(t, "call", "sleep", `{"duration":"1ms"}`, "--model", "gpt-5.1")
	require.NotEqual(t, toolctl.ExitOK, out.code)
	require.Contains(t, out.stdout+out.stderr, "hidden by toolset gpt")
	// tools show --model shows the tool as tools list --model lists it.
	out = b.run(t, "tools", "show", "sleep", "--model", "gpt-5.1")
	require.Equal(t, toolctl.ExitToolError, out.code, out.stdout)
	require.Contains(t, out.stderr, "NOT_FOUND")
	out = b.run(t, "tools", "show", "sleep", "--model", "claude-sonnet-4-5", "--format", "mcp")
	require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
	require.Contains(t, out.stdout, `"sleep"`)
}
