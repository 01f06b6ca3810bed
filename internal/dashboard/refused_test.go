package dashboard

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// denyLoginPolicy refuses the login tool by a rule with a reason.
const denyLoginPolicy = `
tenant:
  default: allow
  rules:
    - {id: no-agent-logins, effect: deny, tools: [login], reason: logins are made by people at the front desk}
`

// refuse makes a call the policy refuses and returns its id.
func refuse(t *testing.T, u *uiStack, id identity.Identity, tool, args string) string {
	t.Helper()
	r, err := u.Dispatcher.Call(t.Context(), id, &toolwirev1.CallRequest{Tool: tool, ArgumentsJson: args, Session: "s-" + id.Tenant}, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMISSION_DENIED, r.GetResponse().GetError().GetType(), "the policy refuses it")
	return r.CallId
}

// Finding 7: a call the policy refuses appears in the calls list, with
// its outcome and reason (filterable), and its page shows the rule and
// its reason; another tenant neither lists nor opens it.
func TestRefusedCallsAppearWithTheirReason(t *testing.T) {
	t.Parallel()
	u := startUI(t, testTools(nil), dispatch.Config{})
	u.ApplyPolicy(t, denyLoginPolicy)
	ok := call(t, u, acmeBot, "echo", `{"text":"allowed"}`)
	denied := refuse(t, u, acmeBot, "login", `{"user":"ann","password":"hunter22-secret"}`)
	theirs := refuse(t, u, globexBot, "login", `{"user":"bob","password":"hunter22-secret"}`)
	waitFor(t, "the index has both refusals", func() bool { return u.UI.index.Stats().Refused >= 2 })

	reader := u.signIn(t, readerKey)
	res, body := reader.get("/ui/calls")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, denied)
	require.Contains(t, body, ok.CallId)
	require.NotContains(t, body, theirs, "another tenant's refusal")
	require.Less(t, strings.Index(body, denied), strings.Index(body, ok.CallId), "newest first, refusals among the calls")
	require.Contains(t, body, "logins are made by people at the front desk")

	_, body = reader.get("/ui/calls?outcome=rejected")
	require.Contains(t, body, denied)
	require.NotContains(t, body, ok.CallId, "only refusals")
	_, body = reader.get("/ui/calls?outcome=ok")
	require.NotContains(t, body, denied)
	_, body = reader.get("/ui/calls?q=front+desk")
	require.Contains(t, body, denied, "the reason is searched")
	_, body = reader.get("/ui/calls?limit=1")
	require.Contains(t, body, denied)
	require.NotContains(t, body, ok.CallId)
	older := regexpOlder.FindStringSubmatch(body)
	require.NotNil(t, older, "a next page")
	_, body = reader.get("/ui/calls?limit=1&" + strings.ReplaceAll(older[1], "&amp;", "&"))
	require.Contains(t, body, ok.CallId, "the next page has the admitted call")
	require.NotContains(t, body, denied)

	res, body = reader.get("/ui/calls/" + denied)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, `data-testid="refused"`)
	require.Contains(t, body, "no-agent-logins")
	require.Contains(t, body, "logins are made by people at the front desk")
	require.NotContains(t, body, "hunter22-secret")

	res, _ = reader.get("/ui/calls/" + theirs)
	require.Equal(t, http.StatusNotFound, res.StatusCode, "another tenant's refusal is an unknown id")
	other := u.signIn(t, otherKey)
	_, body = other.get("/ui/calls?outcome=rejected")
	require.Contains(t, body, theirs)
	require.NotContains(t, body, denied)
}

// regexpOlder finds the calls page's link to its next page (its query).
var regexpOlder = regexp.MustCompile(`data-testid="older" href="/ui/calls\?([^"]*)"`)

// Finding 7 in a real Chromium (testdata/dashboard-e2e/refused.mjs): a
// call denied by a policy rule is in the calls list as rejected with the
// rule's reason, the outcome filter finds it, and its page shows the rule
// and its reason.
func TestBrowserRefusedCall(t *testing.T) {
	t.Parallel()
	u := startUI(t, testTools(nil), dispatch.Config{})
	u.ApplyPolicy(t, denyLoginPolicy)
	call(t, u, acmeBot, "echo", `{"text":"allowed"}`)
	denied := refuse(t, u, acmeBot, "login", `{"user":"ann","password":"hunter22-secret"}`)
	waitFor(t, "the index has the refusal", func() bool { _, ok := u.UI.index.Get(denied); return ok })
	runBrowser(t, "refused.mjs", map[string]string{"BASE_URL": u.Srv.URL, "READER_KEY": readerKey, "DENIED": denied,
		"RULE": "no-agent-logins", "REASON": "logins are made by people at the front desk"})
}
