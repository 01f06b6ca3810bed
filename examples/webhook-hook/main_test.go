package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/executors/httpexec"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/internal/specfile"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

const testToken = "test-token-0123456789"

// The webhook, bound as an after-hook through its HTTP tool spec and the
// example policy (both files of this directory, as they ship): a response
// holding an e-mail address and a card number is stored and answered
// redacted, with the count in the response's meta; a clean one passes as
// it is. The worker reads the token from its environment.
func TestWebhookRedactsResponsesAsAnAfterHook(t *testing.T) {
	srv := httptest.NewServer(handler(testToken, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	t.Setenv("REDACT_PII_AUTHORIZATION", "Bearer "+testToken)
	spec, err := specfile.Load(os.DirFS("."), "redact_pii.yaml", specfile.Options{Vars: map[string]string{
		"REDACT_PII_URL": srv.URL, "REDACT_PII_NETWORK": "127.0.0.1/32", "REDACT_PII_PORT": strconv.Itoa(port)}})
	require.NoError(t, err)

	s := dispatchtest.Start(t, dispatchtest.Options{Tools: builtin.Tools()})
	exec, err := httpexec.New(httpexec.Config{})
	require.NoError(t, err)
	s.StartExecutorWorker(t, toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP, exec, spec)
	s.WaitTool(t, "redact_pii")
	doc, err := os.ReadFile("policy.yaml")
	require.NoError(t, err)
	a, err := policystore.NewStore(s.Env.Bus, nil).Apply(t.Context(), policystore.Installation, doc, policystore.ApplyOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Policies.Wait(t.Context(), policystore.Installation, a.Version.Version, a.Revision))

	echo := func(text string) *toolwirev1.ToolResponse {
		r, err := s.Dispatcher.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "echo",
			ArgumentsJson: `{"text":"` + text + `"}`}, 30*time.Second)
		require.NoError(t, err)
		require.True(t, r.Response.Ok, "%v", r.Response.GetError())
		return r.Response
	}
	r := echo("write to ann@example.com, card 4111 1111 1111 1111")
	require.Equal(t, "write to [email], card [card]", r.Content[0].GetText().GetText())
	require.JSONEq(t, `{"text":"write to [email], card [card]"}`, r.StructuredJson)
	require.Len(t, r.Meta.Hooks, 1)
	require.Equal(t, "redact", r.Meta.Hooks[0].Action)
	require.Equal(t, map[string]string{"pii_redacted": "4"}, r.Meta.Hooks[0].Annotations)

	// What the audit keeps is the redaction.
	b := s.Env.Bus
	m, err := bus.LastMsg(t.Context(), b.Results, strings.Replace(b.Subjects.Result("default", "D", r.CallId), ".D.", ".*.", 1))
	require.NoError(t, err)
	var stored toolwirev1.ToolResponse
	require.NoError(t, proto.Unmarshal(m.Data, &stored))
	require.NotContains(t, stored.String(), "ann@example.com")
	require.NotContains(t, stored.String(), "4111")

	r = echo("nothing personal")
	require.Equal(t, "nothing personal", r.Content[0].GetText().GetText())
	require.Equal(t, "continue", r.Meta.Hooks[0].Action)
}

// The webhook answers only callers with its token, and refuses a body
// over its limit before reading it all.
func TestWebhookRefusesStrangersAndHugeBodies(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(handler(testToken, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	post := func(auth string, body io.Reader) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/hook", body)
		require.NoError(t, err)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusUnauthorized, post("", strings.NewReader(`{}`)))
	require.Equal(t, http.StatusUnauthorized, post("Bearer wrong-token-0123456789", strings.NewReader(`{}`)))
	require.Equal(t, http.StatusBadRequest, post("Bearer "+testToken, strings.NewReader(`{"phase":"before"}`)))
	huge := io.MultiReader(strings.NewReader(`{"hook":"`), strings.NewReader(strings.Repeat("x", maxBody)), strings.NewReader(`"}`))
	require.Equal(t, http.StatusRequestEntityTooLarge, post("Bearer "+testToken, huge))
}
