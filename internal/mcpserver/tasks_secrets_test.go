package mcpserver_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/mcpserver"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// taskCanary is a secret argument; taskCanaryMark is what must be found
// nowhere in the tasks bucket.
const (
	taskCanary     = "task-canary-5d3b9a17e0c2-secret"
	taskCanaryMark = "5d3b9a17e0c2"
)

// A task of a tool with a secret argument keeps no secret in the tasks
// bucket: every entry, every revision, read raw from its stream. The
// task still runs with the real arguments: the tool asks for input, and
// the call that answers it (submitted from the task's record, on the
// other replica) gets the secret the task was created with.
func TestTaskRecordsHoldNoSecret(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	login := tool.Must(tool.New("login", func(ctx context.Context, in struct {
		User     string `json:"user"`
		Password string `json:"password" toolwire:"secret"`
	}) (*tool.Result, error) {
		if a := tool.InputFrom(ctx); a != nil && a.PreviousCallID != "" {
			var code struct{ Code string }
			if ok, err := a.Elicited("otp", &code); err == nil && ok {
				// Never echoes the secret: says whether it got it.
				return &tool.Result{Content: []*toolwirev1.Content{tool.Text(
					"welcome " + in.User + ", code " + code.Code + ", password ok: " + boolText(in.Password == taskCanary))}}, nil
			}
		}
		<-release
		return tool.NeedInput(map[string]tool.InputRequest{"otp": tool.Elicit("One-time code?",
			object(map[string]string{"code": "string"}))}, nil), nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), login), Auth: twoTenantKeys(t)})
	other := s.StartDispatcher(t, dispatch.Config{})
	serve := func(d *dispatch.Dispatcher) string {
		mux := http.NewServeMux()
		ms, err := mcpserver.New(d, twoTenantKeys(t), mcpserver.Config{TaskAfter: 200 * time.Millisecond, Tasks: d.Tasks()})
		require.NoError(t, err)
		ms.Handle(mux)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return srv.URL + mcpserver.Path
	}
	one, two := taskClient{t, serve(s.Dispatcher), "a"}, taskClient{t, serve(other), "a"}

	created, e := one.rpc("tools/call", map[string]any{"name": "login",
		"arguments": map[string]any{"user": "ada", "password": taskCanary}})
	require.Nil(t, e)
	require.Equal(t, "task", created["resultType"])
	id := created["taskId"].(string)
	close(release)
	waiting := two.until(id, "input_required")
	require.Contains(t, waiting["inputRequests"], "1.otp")
	_, e = two.rpc("tasks/update", map[string]any{"taskId": id,
		"inputResponses": map[string]any{"1.otp": map[string]any{"action": "accept", "content": map[string]any{"code": "424242"}}}})
	require.Nil(t, e)
	done := one.until(id, "completed")
	require.Equal(t, "welcome ada, code 424242, password ok: true",
		done["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"],
		"the answering call ran with the real arguments")

	text := kvStreamText(t, s.Env.Bus.JS, "KV_"+s.Env.Bus.Config.TasksBucket())
	require.Contains(t, text, id, "the task's record was read")
	if i := strings.Index(text, taskCanaryMark); i >= 0 {
		t.Fatalf("the tasks bucket holds the secret: …%s…", text[max(0, i-200):min(len(text), i+100)])
	}
	require.Contains(t, text, `[REDACTED]`, "the secret field is kept, redacted")
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// kvStreamText returns every message stored in stream name (subject,
// headers and data; every revision of every key) as text.
func kvStreamText(t *testing.T, js jetstream.JetStream, name string) string {
	t.Helper()
	st, err := js.Stream(t.Context(), name)
	require.NoError(t, err)
	cons, err := st.OrderedConsumer(t.Context(), jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	var b strings.Builder
	for {
		batch, err := cons.FetchNoWait(256)
		require.NoError(t, err)
		n := 0
		for m := range batch.Messages() {
			n++
			b.WriteString(m.Subject())
			for k, v := range m.Headers() {
				b.WriteString(" " + k + "=" + strings.Join(v, ","))
			}
			b.WriteByte(' ')
			b.Write(m.Data())
			b.WriteByte('\n')
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			require.NoError(t, err)
		}
		if n == 0 {
			return b.String()
		}
	}
}
