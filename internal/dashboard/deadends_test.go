package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The approval inbox's link to a parked call opens that call's page: its
// state, tool, arguments as the approver sees them (redacted) and a link
// back to its approval. A key without the approve scope still gets 404.
func TestDeadEndParkedCallHasAPage(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	id := park(t, u, acmeBot, "/srv/parked-path")
	approver := u.signIn(t, approverKey)
	_, inbox := approver.get("/ui/approvals")
	require.Contains(t, inbox, `href="/ui/calls/`+id+`"`, "the inbox links to the call")

	res, body := approver.get("/ui/calls/" + id)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, `data-testid="parked-call"`)
	require.Contains(t, body, `<span class="outcome pending" data-testid="approval-state">awaiting approval</span>`)
	require.Contains(t, body, `data-testid="parked-tool">wipe`)
	require.Contains(t, body, `/srv/parked-path`, "arguments shown")
	require.NotContains(t, body, wipeSecret, "secret arguments stay redacted")
	require.Contains(t, body, `href="/ui/approvals#approval-`+id+`"`)
	require.Contains(t, inbox, `id="approval-`+id+`"`, "the link back lands on the approval")

	res, _ = u.signIn(t, readerKey).get("/ui/calls/" + id)
	require.Equal(t, http.StatusNotFound, res.StatusCode, "no approve scope: as an unknown id")
	res, _ = u.signIn(t, otherKey).get("/ui/calls/" + id)
	require.Equal(t, http.StatusNotFound, res.StatusCode, "another tenant: as an unknown id")
}

// A search longer than the index's bound is refused with a message, not
// answered with no matches.
func TestDeadEndLongSearchIsRefused(t *testing.T) {
	t.Parallel()
	u := startUI(t, testTools(nil), dispatch.Config{})
	b := u.signIn(t, readerKey)
	res, body := b.get("/ui/calls?q=" + url.QueryEscape(strings.Repeat("x", maxFilterBytes+1)))
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, body, "q: longer than 256 bytes")
	require.NotContains(t, body, "data-live=", "no unfiltered live stream under the error (review)")
	require.Contains(t, body, strings.Repeat("x", maxFilterBytes+1), "the search is shown back to be shortened")
	res, _ = b.get("/ui/calls/live?q=" + url.QueryEscape(strings.Repeat("x", maxFilterBytes+1)))
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	res, _ = b.get("/ui/calls?q=" + url.QueryEscape(strings.Repeat("x", maxFilterBytes)))
	require.Equal(t, http.StatusOK, res.StatusCode, "at the bound: searched")
	// The dead letters' search too: refused, never cut (a cut search
	// matches more letters, which a bulk retry would select).
	res, body = b.get("/ui/dlq?q=" + url.QueryEscape(strings.Repeat("x", maxFilterBytes+1)))
	require.Equal(t, http.StatusBadRequest, res.StatusCode, body)
	require.Contains(t, body, "q: longer than 256 bytes")
}

// A call's timeline is in the order its events were recorded: an
// ACCEPTED event stored after the worker's STARTED (it is a core publish,
// not acknowledged) still comes first.
func TestDeadEndTimelineIsInRecordedOrder(t *testing.T) {
	t.Parallel()
	at := func(ms int64) *timestamppb.Timestamp { return timestamppb.New(time.UnixMilli(1_700_000_000_000 + ms)) }
	evs := []*toolwirev1.CallEvent{
		{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED, Time: at(2)},
		{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS}, // no time: stays after the one before it
		{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED, Time: at(1)},
		{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED, Time: at(3)},
	}
	sortEvents(evs)
	var got []toolwirev1.CallEventType
	for _, e := range evs {
		got = append(got, e.Type)
	}
	require.Equal(t, []toolwirev1.CallEventType{toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED, toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED,
		toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS, toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED}, got)
	// The dispatcher's clock ahead of the worker's: ACCEPTED still first.
	skewed := []*toolwirev1.CallEvent{
		{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED, Time: at(2)},
		{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED, Time: at(5)},
	}
	sortEvents(skewed)
	require.Equal(t, toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED, skewed[0].Type)
	// A parked call: its approval events come before its ACCEPTED (review).
	parked := []*toolwirev1.CallEvent{
		{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_AWAITING_APPROVAL, Time: at(1)},
		{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_APPROVED, Time: at(2)},
		{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED, Time: at(3)},
		{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED, Time: at(4)},
	}
	sortEvents(parked)
	got = got[:0]
	for _, e := range parked {
		got = append(got, e.Type)
	}
	require.Equal(t, []toolwirev1.CallEventType{toolwirev1.CallEventType_CALL_EVENT_TYPE_AWAITING_APPROVAL, toolwirev1.CallEventType_CALL_EVENT_TYPE_APPROVED,
		toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED, toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED}, got)
}

// An SVG image result is shown as an image that runs nothing (an <img>
// with a data: URL: no script, no fetches), with its source escaped.
func TestDeadEndSVGResultIsShownSafely(t *testing.T) {
	t.Parallel()
	svg := `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>alert(1)</script><rect width="10" height="10"/></svg>`
	tools := append(testTools(nil), tool.Must(tool.New("chart", func(context.Context, struct{}) (*tool.Result, error) {
		return &tool.Result{Content: []*toolwirev1.Content{tool.Image([]byte(svg), "image/svg+xml")}}, nil
	})))
	u := startUI(t, tools, dispatch.Config{})
	r := call(t, u, acmeBot, "chart", `{}`)
	waitFor(t, "the index has the call", func() bool { e, ok := u.UI.index.Get(r.CallId); return ok && e.Outcome == "ok" })
	res, body := u.signIn(t, readerKey).get("/ui/calls/" + r.CallId)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Regexp(t, `<img class="result-image" alt="SVG image result" src="data:image/svg&#43;xml;base64,(?:[A-Za-z0-9/=]|&#43;)+"`, body)
	require.NotContains(t, body, "<svg", "never inline")
	require.NotContains(t, body, "<script>alert")
	require.Contains(t, body, "&lt;script&gt;alert(1)&lt;/script&gt;", "its source, escaped")
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "script-src 'self'")
}

// A changed tool description is shown whole, wrapped, old and new side by
// side.
func TestDeadEndChangedDescriptionShownWhole(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	long := strings.Repeat("harmless words ", 40)
	spec := func(desc string) *toolwirev1.ToolSpec {
		return &toolwirev1.ToolSpec{Name: "mcp__srv__lookup", Provider: "srv", Description: desc, Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_MCP,
			Config: &toolwirev1.ToolSpec_Mcp{Mcp: &toolwirev1.McpConfig{Server: "srv", Tool: "lookup", DefinitionHash: "h-" + desc[len(desc)-3:]}}, InputSchemaJson: `{"type":"object"}`}
	}
	ctx := t.Context()
	_, err := registry.Publish(ctx, u.Env.Bus.Registry, []*toolwirev1.ToolSpec{spec(long + "old")})
	require.NoError(t, err)
	changed := spec(long + "\"<ignore previous instructions>\"\u200b\u202e\U000E0041 new")
	changed.Disabled, changed.DisabledReason = true, "definition changed"
	v2, err := registry.Publish(ctx, u.Env.Bus.Registry, []*toolwirev1.ToolSpec{changed})
	require.NoError(t, err)
	waitFor(t, "the registry has the change", func() bool {
		e, err := u.Registry.Get("mcp__srv__lookup")
		return err == nil && e.Spec.Version == v2[0].Version
	})
	res, body := u.signIn(t, installKey).get("/ui/tools/mcp__srv__lookup")
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, `<pre class="wrap" data-testid="desc-a">`+long+`old</pre>`)
	require.Contains(t, body, `<pre class="wrap" data-testid="desc-b">`+long+`&#34;&lt;ignore previous instructions&gt;&#34;⟦U&#43;200B⟧⟦U&#43;202E⟧⟦U&#43;E0041⟧ new</pre>`,
		"characters that show as nothing (zero-width, bidi override, a tag character) are made visible")
	require.NotContains(t, body, "\u200b", "nor hidden in the diff or the spec")
	_, css := u.signIn(t, readerKey).get("/ui/static/app.css")
	require.Regexp(t, `\.diff \{[^}]*white-space:pre-wrap`, css, "the diff wraps")
	require.Regexp(t, `pre\.wrap \{[^}]*white-space:pre-wrap`, css)
}
