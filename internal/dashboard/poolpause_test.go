package dashboard

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// An installation admin pauses a pool from its card, with a reason: the
// page shows it paused, by whom and why, new calls are refused; a
// tenant's admin may not; resumed, calls run again.
func TestPoolPausedAndResumedFromItsCard(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	ctx := t.Context()
	root := u.signIn(t, installKey)
	waitFor(t, "the native pool's card", func() bool {
		_, body := root.get("/ui/pools")
		return strings.Contains(body, `data-pool="native"`)
	})
	_, body := root.get("/ui/pools")
	require.Contains(t, body, `action="/ui/pools/native/pause"`)
	require.NotContains(t, body, `data-testid="paused"`)

	tenantAdmin := u.signIn(t, adminKey)
	res, body := tenantAdmin.act("/ui/pools/native/pause", url.Values{"reason": {"mine"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, body)

	// A reason that is not UTF-8 is the client's error, and a name that
	// cannot be a pool's (one past the NATS server's control line limit
	// would close the dispatcher's connection) is no pool, not echoed.
	res, body = root.act("/ui/pools/native/pause", url.Values{"reason": {"bad \xff"}})
	require.Equal(t, http.StatusBadRequest, res.StatusCode, body)
	long := strings.Repeat("a", 5000)
	for _, action := range []string{"pause", "resume"} {
		res, body = root.act("/ui/pools/"+long+"/"+action, nil)
		require.Equal(t, http.StatusNotFound, res.StatusCode, action)
		require.NotContains(t, body, long[:65], action)
	}

	res, body = root.act("/ui/pools/native/pause", url.Values{"reason": {"upstream <b>incident</b>"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode, body)
	require.True(t, strings.HasPrefix(res.Header.Get("Location"), "/ui/pools?done="))
	_, body = root.get(res.Header.Get("Location"))
	require.Contains(t, body, `data-testid="paused"`)
	require.Contains(t, body, "Paused by <b>acme/root</b>")
	require.Contains(t, body, "upstream &lt;b&gt;incident&lt;/b&gt;", "the reason, escaped")
	require.Contains(t, body, `action="/ui/pools/native/resume"`)

	r, err := u.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`}, 0)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED, r.Response.GetError().GetType())
	require.Contains(t, r.Response.GetError().GetMessage(), "pool native is paused")

	res, body = root.act("/ui/pools/native/resume", nil)
	require.Equal(t, http.StatusSeeOther, res.StatusCode, body)
	_, body = root.get("/ui/pools")
	require.NotContains(t, body, `data-testid="paused"`)
	r, err = u.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`}, 0)
	require.NoError(t, err)
	require.True(t, r.Response.Ok, "%v", r.Response.GetError())

	res, _ = root.act("/ui/pools/nosuch/pause", nil)
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}
