package dispatch_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/pkg/hook"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// hookLog records which hooks looked at which calls, in order.
type hookLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *hookLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, s)
}

func (l *hookLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.seen
	l.seen = nil
	return out
}

// guardTool is a before-hook: it answers by the text of the echo call it
// looks at.
func guardTool(log *hookLog) *tool.Tool {
	return tool.Must(tool.New("guard", func(ctx context.Context, in hook.BeforeRequest) (hook.BeforeAnswer, error) {
		var args struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(in.Arguments, &args)
		log.add(in.Hook + ":" + in.Tool + ":" + args.Text)
		switch {
		case in.Hook != "first":
			return hook.BeforeAnswer{Action: "continue"}, nil
		case args.Text == "deny-me":
			return hook.BeforeAnswer{Action: "deny", Reason: "not this text"}, nil
		case args.Text == "ask-me":
			return hook.BeforeAnswer{Action: "ask", Reason: "a person should look"}, nil
		case args.Text == "rewrite-me":
			return hook.BeforeAnswer{Action: "rewrite", Arguments: json.RawMessage(`{"text":"rewritten secret"}`)}, nil
		case args.Text == "bad-rewrite":
			return hook.BeforeAnswer{Action: "rewrite", Arguments: json.RawMessage(`{"text":5}`)}, nil
		case args.Text == "slow":
			select {
			case <-time.After(10 * time.Second):
			case <-ctx.Done():
				return hook.BeforeAnswer{}, ctx.Err()
			}
		}
		return hook.BeforeAnswer{Action: "continue"}, nil
	}))
}

func hooksStack(t *testing.T, doc string) (*dispatchtest.Stack, *hookLog) {
	t.Helper()
	log := &hookLog{}
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), guardTool(log)), Concurrency: 8})
	a, err := policystore.NewStore(s.Env.Bus, nil).Apply(t.Context(), policystore.Installation, []byte(doc), policystore.ApplyOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Policies.Wait(t.Context(), policystore.Installation, a.Version.Version, a.Revision))
	return s, log
}

const hooksDoc = `tenant:
  default: allow
  rules:
    - id: no-secret
      effect: deny
      tools: [echo]
      args: {text: "*secret*"}
      reason: secrets stay home
hooks:
  - {id: second, phase: before, tool: guard, tools: [echo], priority: 20}
  - {id: first, phase: before, tool: guard, tools: [echo], priority: 10, timeout: 3s}
`

func echoCall(t *testing.T, s *dispatchtest.Stack, text string) *toolwirev1.CallResponse {
	t.Helper()
	args, err := json.Marshal(map[string]string{"text": text})
	require.NoError(t, err)
	r, err := s.Dispatcher.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: string(args)}, 30*time.Second)
	require.NoError(t, err)
	return r
}

// Before-hooks run in priority order on the calls they cover, and can
// deny, ask, or rewrite the arguments (validated again; the rules see the
// rewritten form); hooks never run on a hook's own call.
func TestBeforeHooks(t *testing.T) {
	t.Parallel()
	s, log := hooksStack(t, hooksDoc)

	r := echoCall(t, s, "hello")
	require.True(t, r.Response.Ok, "%v", r.Response.GetError())
	require.Equal(t, []string{"first:echo:hello", "second:echo:hello"}, log.take(), "priority order, and no hook on the hooks' own calls")

	r = echoCall(t, s, "deny-me")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.Response.GetError().GetType())
	require.Contains(t, r.Response.GetError().GetMessage(), `hook "first" denies this call of "echo": not this text`)
	require.Equal(t, []string{"first:echo:deny-me"}, log.take(), "a deny stops the hooks")

	r = echoCall(t, s, "rewrite-me")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.Response.GetError().GetType(), "the rules see the rewritten text")
	require.Contains(t, r.Response.GetError().GetMessage(), "secrets stay home")
	require.Equal(t, []string{"first:echo:rewrite-me", "second:echo:rewritten secret"}, log.take(), "later hooks see the rewrite too")

	r = echoCall(t, s, "bad-rewrite")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, r.Response.GetError().GetType())
	require.Contains(t, r.Response.GetError().GetMessage(), `hook "first" rewrote the arguments into ones the tool refuses`)
	log.take()

	r = echoCall(t, s, "ask-me")
	require.Equal(t, toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, r.State)
	require.Contains(t, r.Response.GetError().GetMessage(), "a person should look")
	log.take()

	// A hook that does not answer in time refuses the call (failure:
	// closed, the default), retryable.
	r = echoCall(t, s, "slow")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, r.Response.GetError().GetType())
	require.True(t, r.Response.GetError().GetRetryable())
	require.Contains(t, r.Response.GetError().GetMessage(), `hook "first" could not look at this call`)

	// Other tools are not hooked; nor is a direct call of the hook tool.
	log.take()
	rr, err := s.Dispatcher.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"1ms"}`}, 30*time.Second)
	require.NoError(t, err)
	require.True(t, rr.Response.Ok)
	require.Empty(t, log.take())
}

// A call the rules deny outright never reaches a before-hook: its
// arguments do not leave the fleet for a third party's webhook, and its
// answer is the rule's (issue 28).
func TestBeforeHooksNeverSeeDeniedCalls(t *testing.T) {
	t.Parallel()
	s, log := hooksStack(t, hooksDoc)
	r := echoCall(t, s, "my secret")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.Response.GetError().GetType())
	require.Contains(t, r.Response.GetError().GetMessage(), "secrets stay home")
	require.Empty(t, log.take(), "no hook looked at a call the rules deny")
}

// failure: open lets the call through when its hook times out.
func TestBeforeHookFailOpen(t *testing.T) {
	t.Parallel()
	s, _ := hooksStack(t, strings.Replace(hooksDoc, "timeout: 3s}", "timeout: 3s, failure: open}", 1))
	r := echoCall(t, s, "slow")
	require.True(t, r.Response.Ok, "%v", r.Response.GetError())
}

// A hook never sees an argument the tool's schema marks secret.
func TestHooksNeverSeeSecrets(t *testing.T) {
	t.Parallel()
	log := &hookLog{}
	login := tool.Must(tool.New("login", func(_ context.Context, in struct {
		User     string `json:"user"`
		Password string `json:"password" toolwire:"secret"`
	}) (string, error) {
		return "ok", nil
	}))
	seen := tool.Must(tool.New("look", func(_ context.Context, in hook.BeforeRequest) (hook.BeforeAnswer, error) {
		log.add(string(in.Arguments))
		return hook.BeforeAnswer{Action: "continue"}, nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), login, seen)})
	a, err := policystore.NewStore(s.Env.Bus, nil).Apply(t.Context(), policystore.Installation,
		[]byte("tenant: {default: allow}\nhooks:\n  - {id: look, phase: before, tool: look, tools: [login]}\n"), policystore.ApplyOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Policies.Wait(t.Context(), policystore.Installation, a.Version.Version, a.Revision))
	r, err := s.Dispatcher.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "login",
		ArgumentsJson: `{"user":"ann","password":"canary-4711"}`}, 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.Ok, "%v", r.Response.GetError())
	got := log.take()
	require.Len(t, got, 1)
	require.Contains(t, got[0], `"user":"ann"`)
	require.NotContains(t, got[0], "canary-4711")
}
