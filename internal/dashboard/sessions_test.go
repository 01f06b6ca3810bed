package dashboard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/callindex"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The sessions page lists the key's own tenant's sessions with their
// state, mode and end reason (escaped), filtered by state; a session's
// page shows its state, mode, pins, log and calls; a call's page names
// its session's state, mode and the version it pins for the call's tool,
// and links to it; a call refused SESSION_INACTIVE is shown refused,
// with its session ended. Another tenant's key sees none of it.
func TestPagesSessions(t *testing.T) {
	t.Parallel()
	u := startUI(t, nil, dispatch.Config{})
	u.ApplyPolicy(t, "tenant:\n  default: allow\nmodes:\n  voice: {}\n")
	echo := call(t, u, acmeBot, "echo", `{"text":"hello"}`) // session s-acme
	call(t, u, globexBot, "echo", `{"text":"hello"}`)       // session s-globex
	_, err := u.Dispatcher.EndSession(t.Context(), acmeBot, "s-acme", "<b>bye</b>")
	require.NoError(t, err)
	_, err = u.Dispatcher.EndSession(t.Context(), globexBot, "s-globex", "")
	require.NoError(t, err)
	_, err = u.Dispatcher.SetSessionMode(t.Context(), acmeBot, "s-voice", "voice")
	require.NoError(t, err)
	waitFor(t, "the index has "+echo.CallId, func() bool { _, ok := u.UI.index.Get(echo.CallId); return ok })

	reader := u.signIn(t, readerKey)
	res, body := reader.get("/ui/sessions")
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, `data-session="s-acme"`)
	require.Contains(t, body, `data-session="s-voice"`)
	require.Contains(t, body, "&lt;b&gt;bye&lt;/b&gt;", "the end reason, escaped")
	require.NotContains(t, body, "<b>bye</b>")
	require.NotContains(t, body, "s-globex", "another tenant's session")
	_, body = reader.get("/ui/sessions?state=active")
	require.NotContains(t, body, `data-session="s-acme"`)
	require.Contains(t, body, `data-session="s-voice"`)
	_, body = reader.get("/ui/sessions?mode=voice&state=ended")
	require.Contains(t, body, "No sessions match.")
	res, _ = reader.get("/ui/sessions?state=bogus")
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	res, _ = reader.get("/ui/sessions?page=nonsense")
	require.Equal(t, http.StatusBadRequest, res.StatusCode)

	res, body = reader.get("/ui/session?id=s-acme")
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, `data-testid="state">ended<`)
	require.Contains(t, body, `data-testid="end-reason">&lt;b&gt;bye&lt;/b&gt;<`)
	require.Contains(t, body, "END_SESSION", "the log")
	require.Contains(t, body, `data-call-id="`+echo.CallId+`"`, "the session's calls")
	require.Contains(t, body, `href="/ui/calls?session=s-acme"`)
	_, body = reader.get("/ui/session?id=s-voice")
	require.Contains(t, body, `data-testid="mode">voice<`)
	require.Contains(t, body, `data-testid="state">active<`)
	require.Contains(t, body, `data-testid="pins"><span class="muted">none<`)
	pinned, err := u.Dispatcher.Call(t.Context(), acmeBot, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"pinned"}`,
		Session: "s-pin", PinSessionVersions: true}, time.Minute)
	require.NoError(t, err)
	version := pinned.Response.GetMeta().GetSpecVersion()
	require.NotEmpty(t, version)
	_, body = reader.get("/ui/session?id=s-pin")
	require.Contains(t, body, `data-testid="pins"><code>echo</code> @ <code>`+version+`<`, "the session's pinned versions")

	_, body = reader.get("/ui/calls/" + echo.CallId)
	require.Contains(t, body, `href="/ui/session?id=s-acme" data-testid="session-link"`)
	require.Contains(t, body, `data-testid="session-state">ended<`)
	require.NotContains(t, body, `data-testid="session-pin"`, "s-acme pins nothing")

	// A call's page names its session's mode and the version the session
	// pins for the call's tool.
	voiced, err := u.Dispatcher.Call(t.Context(), acmeBot, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"spoken"}`,
		Session: "s-voice"}, time.Minute)
	require.NoError(t, err)
	for _, id := range []string{pinned.CallId, voiced.CallId} {
		waitFor(t, "the index has "+id, func() bool { _, ok := u.UI.index.Get(id); return ok })
	}
	_, body = reader.get("/ui/calls/" + voiced.CallId)
	require.Contains(t, body, `data-testid="session-state">active<`)
	require.Contains(t, body, `data-testid="session-mode">voice<`)
	_, body = reader.get("/ui/calls/" + pinned.CallId)
	require.Contains(t, body, `pins echo @ <code data-testid="session-pin">`+version+`<`)

	// A call in the ended session is refused SESSION_INACTIVE; its page
	// says so, shows the session ended and links to it.
	late, err := u.Dispatcher.Call(t.Context(), acmeBot, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"too late"}`,
		Session: "s-acme"}, time.Minute)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_SESSION_INACTIVE, late.Response.GetError().GetType())
	waitFor(t, "the index has "+late.CallId, func() bool { _, ok := u.UI.index.Get(late.CallId); return ok })
	_, body = reader.get("/ui/calls/" + late.CallId)
	require.Contains(t, body, `data-testid="refused"`)
	require.Contains(t, body, "ERROR_TYPE_SESSION_INACTIVE")
	require.Contains(t, body, `session &#34;s-acme&#34; has ended: &lt;b&gt;bye&lt;/b&gt;`)
	require.Contains(t, body, `href="/ui/session?id=s-acme" data-testid="session-link"`)
	require.Contains(t, body, `data-testid="session-state">ended<`)

	other := u.signIn(t, otherKey)
	_, body = other.get("/ui/sessions")
	require.NotContains(t, body, "s-acme")
	require.Contains(t, body, `data-session="s-globex"`)
	_, body = other.get("/ui/session?id=s-acme")
	require.NotContains(t, body, "bye", "globex's s-acme is another session, never written")
	require.NotContains(t, body, echo.CallId)

	anonymous := u.newBrowser(t)
	for _, p := range []string{"/ui/sessions", "/ui/session?id=s-acme"} {
		res, _ = anonymous.get(p)
		require.Equal(t, http.StatusSeeOther, res.StatusCode, p)
	}
}

// Under agent visibility "own" a key without the admin or approve scope
// is refused the sessions list (a session has no owner agent); an admin
// lists them.
func TestPagesSessionsVisibilityOwn(t *testing.T) {
	t.Parallel()
	u := startUIWith(t, nil, dispatch.Config{AgentVisibility: identity.VisibilityOwn}, func(c *Config) { c.AgentVisibility = identity.VisibilityOwn }, nil)
	call(t, u, acmeBot, "echo", `{"text":"hello"}`)
	_, err := u.Dispatcher.EndSession(t.Context(), acmeBot, "s-acme", "done")
	require.NoError(t, err)
	res, body := u.signIn(t, readerKey).get("/ui/sessions")
	require.Equal(t, http.StatusForbidden, res.StatusCode, body)
	require.NotContains(t, body, `data-session="s-acme"`)
	res, body = u.signIn(t, adminKey).get("/ui/sessions")
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, `data-session="s-acme"`)
}

// A call over its soft latency budget has the LATENCY_BUDGET_EXCEEDED
// event on its page's timeline, naming the budget and where it came from;
// the call itself succeeded.
func TestCallPageShowsTheLatencyBudgetOverrun(t *testing.T) {
	t.Parallel()
	u := startUI(t, nil, dispatch.Config{})
	u.ApplyPolicy(t, "tenant:\n  default: allow\nlatency_budgets:\n  - {id: quick-sleep, tools: [sleep], soft: 1ms}\n")
	slow := call(t, u, acmeBot, "sleep", `{"duration":"50ms"}`)
	require.True(t, slow.Response.GetOk(), "%v", slow.Response.GetError())
	require.NotNil(t, slow.Response.GetMeta().GetLatencyBudgetExceeded())
	reader := u.signIn(t, readerKey)
	var body string
	waitFor(t, "the timeline shows the overrun", func() bool {
		if _, ok := u.UI.index.Get(slow.CallId); !ok {
			return false
		}
		_, body = reader.get("/ui/calls/" + slow.CallId)
		return strings.Contains(body, "latency budget exceeded")
	})
	require.Contains(t, body, `class="ev CALL_EVENT_TYPE_LATENCY_BUDGET_EXCEEDED"`)
	require.Contains(t, body, "over its soft latency budget of 1ms (policy")
	require.Contains(t, body, `data-testid="outcome">ok<`)
}

// A call's page shows the outcome of the result it shows: a dashboard
// whose calls index has not yet read the call's result (its feed lags the
// stores) says "ok" beside the result, not "pending".
func TestCallPageOutcomeIsItsResultsWhileTheIndexLags(t *testing.T) {
	t.Parallel()
	u := startUI(t, nil, dispatch.Config{})
	done := call(t, u, acmeBot, "echo", `{"text":"hello"}`)
	require.True(t, done.Response.GetOk(), "%v", done.Response.GetError())
	var e callindex.Entry
	waitFor(t, "the index has the call's outcome", func() bool {
		var ok bool
		e, ok = u.UI.index.Get(done.CallId)
		return ok && e.Outcome == audit.OutcomeOK
	})
	lagging, err := New(u.UI.cfg) // never started: its index is fed by hand
	require.NoError(t, err)
	e.Outcome = audit.OutcomePending
	require.True(t, lagging.index.Add(e, nil, nil))
	mux := http.NewServeMux()
	lagging.Handle(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	res, body := (&uiStack{Stack: u.Stack, UI: lagging, Srv: srv}).signIn(t, readerKey).get("/ui/calls/" + done.CallId)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, `data-testid="result"`)
	require.Contains(t, body, `data-testid="outcome">ok<`)
}
