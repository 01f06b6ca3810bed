package mcpserver_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/mcpserver"
	"github.com/toolwire/toolwire/internal/policystore"
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
// other replica) gets the secret the task was created with. With a call
// parked for approval besides, every store of the layout is read raw: the
// secret is only in the stores docs/reliability.md lists as stored in
// clear, and each of those is a store of the layout.
func TestTasksAndEveryUndocumentedStoreHoldNoSecret(t *testing.T) {
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
	vault := tool.Must(tool.New("vault", func(_ context.Context, in struct {
		Key string `json:"key" toolwire:"secret"`
	}) (string, error) {
		return "opened", nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), login, vault), Auth: twoTenantKeys(t)})
	a, err := policystore.NewStore(s.Env.Bus, nil).Apply(t.Context(), policystore.Installation,
		[]byte("tenant:\n  default: allow\n  rules:\n    - {id: ask-vault, effect: ask, tools: [vault]}\n"), policystore.ApplyOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Policies.Wait(t.Context(), policystore.Installation, a.Version.Version, a.Revision))
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
	require.False(t, holdsCanary(text), "the tasks bucket holds the secret, encoded")
	require.Contains(t, text, `[REDACTED]`, "the secret field is kept, redacted")

	// A call parked for an approver, with the secret.
	caller := identity.Identity{Tenant: "acme", Agent: "agent", Scopes: []string{"*"}}
	sub, err := s.Dispatcher.Submit(t.Context(), caller, &toolwirev1.CallRequest{Tool: "vault",
		ArgumentsJson: `{"key":"` + taskCanary + `"}`})
	require.NoError(t, err)
	require.NotNil(t, sub.Awaiting, "parked")

	// Every store of the layout, read raw.
	clear := clearTextStores(t)
	stores := s.Env.Bus.Config.Stores()
	names := map[string]bool{}
	for _, st := range stores {
		names[st.Name] = true
		if want, ok := clear[st.Name]; ok {
			require.Equal(t, st.Stream, want, "docs/reliability.md names %s's stream", st.Name)
		}
		found := holdsCanary(kvStreamText(t, s.Env.Bus.JS, st.Stream))
		if found && clear[st.Name] == "" {
			t.Errorf("store %s (%s) holds a secret argument, and docs/reliability.md does not list it as stored in clear", st.Name, st.Stream)
		}
		if st.Name == "calls" || st.Name == "approvals" {
			require.True(t, found, "the %s store keeps the secret to run the call (the scan reads it)", st.Name)
		}
	}
	for name := range clear {
		require.True(t, names[name], "docs/reliability.md lists %q, no store of the layout", name)
	}
	require.NotContains(t, clear, "tasks")
}

// clearTextStores reads the table of stores that keep secret arguments
// in clear from docs/reliability.md: store name to stream name.
func clearTextStores(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "reliability.md"))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(doc), "**Stored in clear:**")
	require.True(t, ok, "docs/reliability.md has its list of stores kept in clear")
	out := map[string]string{}
	in := false
	for line := range strings.Lines(rest) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if in {
				break
			}
			continue
		}
		in = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		name, stream := strings.TrimSpace(cells[0]), strings.TrimSpace(cells[1])
		if !strings.HasPrefix(name, "`") {
			continue // the header and its rule
		}
		out[strings.Trim(name, "`")] = strings.Trim(stream, "`")
	}
	require.NotEmpty(t, out, "the table of stores kept in clear")
	return out
}

// holdsCanary reports whether text holds the task canary: as is, or
// base64-encoded (JSON's form of bytes, such as a protobuf message in a
// JSON record) at any of the three alignments.
func holdsCanary(text string) bool {
	if strings.Contains(text, taskCanaryMark) {
		return true
	}
	for shift := range 3 {
		enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", shift) + taskCanary))
		// The characters that depend on the bytes around the canary
		// (the first and last four) are left out.
		if strings.Contains(text, enc[4:len(enc)-4]) {
			return true
		}
	}
	return false
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
