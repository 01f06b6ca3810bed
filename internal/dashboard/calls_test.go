package dashboard

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

var (
	acmeBot   = identity.Identity{Tenant: "acme", Agent: "bot", Scopes: []string{"*"}}
	globexBot = identity.Identity{Tenant: "globex", Agent: "bot", Scopes: []string{"*"}}
)

// testTools are the built-in tools plus login (a secret argument) and
// hold (runs until cancelled or released).
func testTools(release <-chan struct{}) []*tool.Tool {
	type login struct {
		User     string `json:"user"`
		Password string `json:"password" toolwire:"secret"`
	}
	return append(builtin.Tools(),
		tool.Must(tool.New("login", func(_ context.Context, in login) (string, error) { return "welcome " + in.User, nil })),
		tool.Must(tool.New("hold", func(ctx context.Context, _ struct{}) (string, error) {
			select {
			case <-release:
				return "released", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})))
}

func call(t *testing.T, u *uiStack, id identity.Identity, tool, args string) *toolwirev1.CallResponse {
	t.Helper()
	r, err := u.Dispatcher.Call(t.Context(), id, &toolwirev1.CallRequest{Tool: tool, ArgumentsJson: args, Session: "s-" + id.Tenant}, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State)
	return r
}

// The calls page lists a key's own tenant's calls, newest first, filters
// them, searches arguments and results but never a secret, and shows one
// call's timeline.
func TestCallsPageListsFiltersAndShowsTimeline(t *testing.T) {
	u := startUI(t, testTools(nil), dispatch.Config{})
	echo := call(t, u, acmeBot, "echo", `{"text":"needle-in-acme"}`)
	login := call(t, u, acmeBot, "login", `{"user":"ann","password":"hunter22-secret"}`)
	require.True(t, login.Response.Ok)
	other := call(t, u, globexBot, "echo", `{"text":"needle-in-globex"}`)
	waitFor(t, "the index has the three calls", func() bool { return u.UI.index.Stats().Entries >= 3 })

	reader := u.signIn(t, readerKey)
	res, body := reader.get("/ui/calls")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, echo.CallId)
	require.Contains(t, body, login.CallId)
	require.NotContains(t, body, other.CallId, "another tenant's call")
	require.Less(t, strings.Index(body, login.CallId), strings.Index(body, echo.CallId), "newest first")

	_, body = reader.get("/ui/calls?tool=login")
	require.Contains(t, body, login.CallId)
	require.NotContains(t, body, echo.CallId)
	_, body = reader.get("/ui/calls?tenant=globex") // not an admin: their own tenant whatever the URL says
	require.NotContains(t, body, other.CallId)
	_, body = reader.get("/ui/calls?q=NEEDLE-in")
	require.Contains(t, body, echo.CallId, "search is case-insensitive, in arguments")
	_, body = reader.get("/ui/calls?q=welcome+ann")
	require.Contains(t, body, login.CallId, "search covers results")
	_, body = reader.get("/ui/calls?q=hunter22")
	require.NotContains(t, body, login.CallId, "a secret argument is never searchable")
	res, body = reader.get("/ui/calls?since=yesterday")
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, body, "since:")

	admin := u.signIn(t, adminKey)
	_, body = admin.get("/ui/calls?tenant=globex")
	require.NotContains(t, body, other.CallId, "a tenant's admin sees its own tenant only")
	install := u.signIn(t, installKey)
	_, body = install.get("/ui/calls?tenant=globex")
	require.Contains(t, body, other.CallId, "the installation scope sees every tenant")

	res, body = reader.get("/ui/calls/" + login.CallId)
	require.Equal(t, http.StatusOK, res.StatusCode)
	for _, want := range []string{"admitted", "<b>result</b>", "welcome ann", "&#34;user&#34;: &#34;ann&#34;", "[REDACTED]"} {
		require.Contains(t, body, want)
	}
	require.NotContains(t, body, "hunter22", "a secret argument is never shown")
	res, _ = reader.get("/ui/calls/" + other.CallId)
	require.Equal(t, http.StatusNotFound, res.StatusCode, "another tenant's call is not found")
}

// A running call is cancelled from its page by an admin; the cancel
// reaches the tool and its record names who cancelled.
func TestCancelFromTheDashboard(t *testing.T) {
	u := startUI(t, testTools(nil), dispatch.Config{})
	sub, err := u.Dispatcher.Submit(t.Context(), acmeBot, &toolwirev1.CallRequest{Tool: "hold"})
	require.NoError(t, err)
	require.Nil(t, sub.Rejected)
	waitFor(t, "the call is indexed", func() bool { _, ok := u.UI.index.Get(sub.CallID); return ok })

	admin := u.signIn(t, adminKey)
	_, body := admin.get("/ui/calls/" + sub.CallID)
	require.Contains(t, body, "Cancel call")
	res, _ := admin.act("/ui/calls/"+sub.CallID+"/cancel", url.Values{"reason": {"stuck"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Contains(t, res.Header.Get("Location"), "done=requested")

	r, err := u.Dispatcher.GetResult(t.Context(), acmeBot, sub.CallID, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, r.Response.GetError().GetType())
	waitFor(t, "the page shows the cancel and who asked", func() bool {
		_, body := admin.get("/ui/calls/" + sub.CallID)
		return strings.Contains(body, "cancelled from the dashboard by acme/ops: stuck") && strings.Contains(body, ">cancelled<")
	})
}

// The live stream sends a new call of the page's filter as a table row,
// and not the calls of another tenant.
func TestLiveStreamSendsNewCalls(t *testing.T) {
	u := startUI(t, testTools(nil), dispatch.Config{})
	reader := u.signIn(t, readerKey)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u.Srv.URL+"/ui/calls/live?tool=echo", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	res, err := reader.c.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))

	other := call(t, u, globexBot, "echo", `{"text":"not yours"}`)
	call(t, u, acmeBot, "sleep", `{"duration":"1ms"}`)
	mine := call(t, u, acmeBot, "echo", `{"text":"live"}`)
	lines := bufio.NewScanner(res.Body)
	for lines.Scan() {
		line := lines.Text()
		require.NotContains(t, line, other.CallId, "another tenant's call")
		require.NotContains(t, line, ">sleep<", "another tool's call")
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, mine.CallId) && strings.Contains(line, ">ok<") {
			return
		}
	}
	t.Fatalf("the stream ended without the call: %v", lines.Err())
}

// openLive opens a live stream as b and returns the response (the caller
// closes its body).
func openLive(t *testing.T, b *browser, query string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, b.base+"/ui/calls/live?"+query, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	res, err := b.c.Do(req)
	require.NoError(t, err)
	return res
}

// A live stream ends once its session has expired: it does not outlive
// the sign-in it was opened with.
func TestLiveStreamEndsWhenTheSessionExpires(t *testing.T) {
	u := startUIWith(t, testTools(nil), dispatch.Config{},
		func(c *Config) { c.SessionTTL = 2 * time.Second },
		func(s *Server) { s.keepAlive = 50 * time.Millisecond })
	reader := u.signIn(t, readerKey)
	res := openLive(t, reader, "")
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	done := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, res.Body); done <- err }()
	select {
	case err := <-done:
		require.NoError(t, err, "the server ended the stream")
	case <-time.After(20 * time.Second):
		t.Fatal("the live stream outlived its session by 18s")
	}
	res, _ = reader.get("/ui/calls")
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "the session has expired")
}

// One key cannot take every live subscription of the index: past
// maxLiveStreamsPerKey its streams are refused, and other keys still get
// theirs.
func TestLiveStreamsPerKeyAreCapped(t *testing.T) {
	u := startUI(t, testTools(nil), dispatch.Config{})
	reader := u.signIn(t, readerKey)
	reader.c.Timeout = 0 // the streams stay open until the test ends
	for range maxLiveStreamsPerKey {
		res := openLive(t, reader, "")
		defer res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode)
	}
	res := openLive(t, reader, "")
	res.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode, "one stream too many for the key")

	other := u.signIn(t, otherKey)
	res = openLive(t, other, "")
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, "another key's stream")
}

// With tracing on, a call's page shows its trace id, linked to the
// tracing UI when one is configured; a trace URL that is not one is
// refused at start.
func TestCallPageLinksItsTrace(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	u := startUIWith(t, testTools(nil), dispatch.Config{TracerProvider: tp},
		func(c *Config) { c.TraceURL = "https://traces.example/trace/{trace_id}" }, nil)
	r := call(t, u, acmeBot, "echo", `{"text":"traced"}`)
	waitFor(t, "the call is indexed", func() bool { _, ok := u.UI.index.Get(r.CallId); return ok })
	_, body := u.signIn(t, readerKey).get("/ui/calls/" + r.CallId)
	require.Regexp(t, `<a href="https://traces.example/trace/[0-9a-f]{32}" rel="noreferrer" data-testid="trace-link"><code data-testid="trace">[0-9a-f]{32}</code></a>`, body)

	for _, bad := range []string{"javascript:alert(1)//{trace_id}", "https://traces.example/trace/", "/trace/{trace_id}"} {
		_, err := New(Config{Core: u.Dispatcher, Approvals: u.Dispatcher.Approvals(), Auth: identity.OpenAccess{}, Registry: u.Registry, Streams: streamsOf(t, u.Env.Bus), TraceURL: bad})
		require.ErrorContains(t, err, "not an http(s) URL with {trace_id}", bad)
	}
}

// A name with a "\r" in it does not break the live stream's framing (a
// line of a server-sent event ends at "\r" too).
func TestLiveStreamKeepsCarriageReturnsInData(t *testing.T) {
	u := startUI(t, testTools(nil), dispatch.Config{})
	reader := u.signIn(t, readerKey)
	res := openLive(t, reader, "")
	defer res.Body.Close()
	r := call(t, u, acmeBot, "ec\rho", `{"text":"x"}`) // refused: no such tool
	lines := bufio.NewScanner(res.Body)
	for lines.Scan() {
		line := lines.Text()
		require.NotContains(t, line, "\r", "a line of the stream")
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, r.CallId) {
			require.Contains(t, line, "ec&#13;ho")
			return
		}
	}
	t.Fatalf("the stream ended without the call: %v", lines.Err())
}
