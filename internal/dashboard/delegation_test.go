package dashboard

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A call's page shows its delegation chain: the child links its parent
// and the parent its children, each with tool and state; another
// tenant's viewer sees neither page (issue 31).
func TestCallPageShowsDelegation(t *testing.T) {
	release := make(chan struct{})
	u := startUI(t, testTools(release), dispatch.Config{MaxQueueWait: time.Minute})
	parent, err := u.Dispatcher.Submit(t.Context(), acmeBot, &toolwirev1.CallRequest{Tool: "hold"})
	require.NoError(t, err)
	require.Nil(t, parent.Rejected)
	t.Cleanup(func() { close(release) })
	child, err := u.Dispatcher.Call(t.Context(), acmeBot, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"sub"}`, ParentCallId: parent.CallID}, 20*time.Second)
	require.NoError(t, err)
	require.True(t, child.GetResponse().GetOk(), "%v", child)
	failed, err := u.Dispatcher.Call(t.Context(), acmeBot, &toolwirev1.CallRequest{Tool: "fail", ArgumentsJson: `{"type":"PERMANENT","message":"no"}`, ParentCallId: parent.CallID}, 20*time.Second)
	require.NoError(t, err)
	require.False(t, failed.GetResponse().GetOk())
	waitFor(t, "the calls are indexed", func() bool {
		_, a := u.UI.index.Get(parent.CallID)
		_, b := u.UI.index.Get(child.CallId)
		return a && b
	})

	reader := u.signIn(t, readerKey)
	res, body := reader.get("/ui/calls/" + parent.CallID)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, "<h2>Delegation</h2>")
	require.Contains(t, body, `<li data-testid="delegation-child"><a href="/ui/calls/`+child.CallId+`"><code>`+child.CallId+`</code></a> · echo · <span class="outcome ok">ok</span></li>`)
	require.Contains(t, body, `<a href="/ui/calls/`+failed.CallId+`"><code>`+failed.CallId+`</code></a> · fail · <span class="outcome error">error</span> <span class="etype">ERROR_TYPE_PERMANENT</span>`)
	require.Less(t, strings.Index(body, child.CallId), strings.Index(body, failed.CallId), "oldest child first")
	require.NotContains(t, body, `data-testid="delegation-ancestor"`, "the root has no ancestors")

	_, body = reader.get("/ui/calls/" + child.CallId)
	require.Contains(t, body, `<li data-testid="delegation-ancestor">parent <a href="/ui/calls/`+parent.CallID+`"><code>`+parent.CallID+`</code></a> · hold · <span class="outcome running">running</span></li>`)
	require.NotContains(t, body, `data-testid="delegation-children"`)

	_, body = reader.get("/ui/calls/" + u.callWithoutChain(t))
	require.NotContains(t, body, "<h2>Delegation</h2>", "a call outside any chain has no section")

	other := u.signIn(t, otherKey)
	for _, id := range []string{parent.CallID, child.CallId} {
		res, body := other.get("/ui/calls/" + id)
		require.Equal(t, http.StatusNotFound, res.StatusCode, "another tenant's call")
		require.NotContains(t, body, "Delegation")
	}
}

// callWithoutChain is an indexed call of acme that names no parent.
func (u *uiStack) callWithoutChain(t *testing.T) string {
	t.Helper()
	r := call(t, u, acmeBot, "echo", `{"text":"alone"}`)
	waitFor(t, "the call is indexed", func() bool { _, ok := u.UI.index.Get(r.CallId); return ok })
	return r.CallId
}
