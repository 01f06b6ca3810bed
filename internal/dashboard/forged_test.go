package dashboard

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/signing"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Finding 1 of issue 27, on the dashboard: a result stored on a call's
// result subject that is not signed by a key enrolled for the call's
// pool (unsigned, an unenrolled key's, another call's signature replayed,
// another call's result whole) is never the call's outcome in the calls
// index, its list and search, or the call's page; the worker's own
// result is, once it comes.
func TestForgedResultsAreNeverShown(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	u := startUI(t, testTools(release), dispatch.Config{})
	ctx := t.Context()
	b := u.Env.Bus
	dispatcher := u.Dispatcher.Config().Name

	other := call(t, u, acmeBot, "echo", `{"text":"replayed"}`)
	require.True(t, other.Response.GetOk(), "%v", other.Response.GetError())
	stored, err := b.Results.GetLastMsgForSubject(ctx, b.Subjects.Result("acme", dispatcher, other.CallId))
	require.NoError(t, err)
	require.NotEmpty(t, stored.Header.Get(signing.HeaderSignature), "the worker signs its results")

	sub, err := u.Dispatcher.Submit(ctx, acmeBot, &toolwirev1.CallRequest{Tool: "hold", ArgumentsJson: `{}`, Session: "s-acme"})
	require.NoError(t, err)
	require.Nil(t, sub.Rejected)
	victim := sub.CallID
	subject := b.Subjects.Result("acme", dispatcher, victim)
	forged, err := proto.Marshal(envelope.OK(victim, "hold", &tool.Result{Content: []*toolwirev1.Content{tool.Text("forged-canary")}},
		&toolwirev1.ResponseMeta{Worker: "forger", Attempt: 1}))
	require.NoError(t, err)
	stranger, err := signing.NewKey()
	require.NoError(t, err)
	replayed := nats.Header{signing.HeaderSigner: stored.Header.Values(signing.HeaderSigner),
		signing.HeaderSignature: stored.Header.Values(signing.HeaderSignature)}
	for _, m := range []*nats.Msg{
		{Subject: subject, Data: forged}, // unsigned
		stranger.SignedMsg(subject, signing.KindResult, victim, 1, forged, nil),
		{Subject: subject, Data: forged, Header: replayed},
		{Subject: subject, Data: stored.Data, Header: replayed}, // another call's result, whole
	} {
		_, err := b.JS.PublishMsg(ctx, m)
		require.NoError(t, err)
	}

	// A later call's result is stored after the forgeries: once the index
	// has its outcome, it has read them.
	marker := call(t, u, acmeBot, "echo", `{"text":"marker"}`)
	waitFor(t, "the index reads past the forgeries", func() bool {
		e, ok := u.UI.index.Get(marker.CallId)
		return ok && e.Outcome == audit.OutcomeOK
	})
	e, ok := u.UI.index.Get(victim)
	require.True(t, ok)
	require.Equal(t, audit.OutcomePending, e.Outcome, "a forged result is no outcome")

	reader := u.signIn(t, readerKey)
	shown := func(what, path string) string {
		res, body := reader.get(path)
		require.Equal(t, http.StatusOK, res.StatusCode, "%s: %s", what, body)
		require.NotContains(t, body, "forged-canary", what)
		return body
	}
	shown("the calls list", "/ui/calls")
	res, list := reader.get("/ui/calls?q=" + url.QueryEscape("forged-canary")) // the search box shows the text searched for
	require.Equal(t, http.StatusOK, res.StatusCode, list)
	require.NotContains(t, list, victim, "the search finds the call by a result it never had")
	page := shown("the call's page", "/ui/calls/"+victim)
	require.Contains(t, page, `data-testid="outcome">pending<`)

	close(release)
	waitFor(t, "the worker's own result is the outcome", func() bool {
		e, ok := u.UI.index.Get(victim)
		return ok && e.Outcome == audit.OutcomeOK
	})
	page = shown("the call's page once answered", "/ui/calls/"+victim)
	require.Contains(t, page, `data-testid="outcome">ok<`)
	require.True(t, strings.Contains(page, "released"), "the page shows the worker's result")
}
