package mcpserver_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/mcpserver"
	"github.com/toolwire/toolwire/pkg/tool"
)

// replica serves d as an MCP endpoint whose replicas meet on b.
func replica(t *testing.T, d *dispatch.Dispatcher, b *bus.Bus) string {
	t.Helper()
	mux := http.NewServeMux()
	ms, err := mcpserver.New(d, identity.OpenAccess{Identity: identity.Default}, mcpserver.Config{Version: "test", Bus: b})
	require.NoError(t, err)
	t.Cleanup(ms.Close)
	ms.Handle(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + mcpserver.Path
}

// holdOpen is a client transport that sends tools/call requests to one
// replica and everything else (the notifications/cancelled) to another,
// as a round-robin proxy may, and keeps a tools/call's request and
// response stream open when the client gives up on it: as for a client
// that cancels only by notifications/cancelled, the stream's end is no
// signal. close ends them.
type holdOpen struct {
	calls, others *url.URL
	ctx           context.Context
	stop          context.CancelFunc
	mu            sync.Mutex
	held          []io.Closer
}

func newHoldOpen(calls, others *url.URL) *holdOpen {
	ctx, stop := context.WithCancel(context.Background())
	return &holdOpen{calls: calls, others: others, ctx: ctx, stop: stop}
}

type roundTrip struct {
	resp *http.Response
	err  error
}

func (h *holdOpen) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
	}
	asked := r.Context()
	r = r.Clone(r.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	isCall := r.Method == http.MethodPost && bytes.Contains(body, []byte(`"method":"tools/call"`))
	to := h.others
	if isCall {
		to = h.calls
		r = r.WithContext(h.ctx)
	}
	r.URL.Scheme, r.URL.Host, r.Host = to.Scheme, to.Host, to.Host
	if !isCall {
		return http.DefaultTransport.RoundTrip(r)
	}
	done := make(chan roundTrip, 1)
	go func() {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err == nil {
			h.mu.Lock()
			h.held = append(h.held, resp.Body)
			h.mu.Unlock()
			resp.Body = struct {
				io.Reader
				io.Closer
			}{resp.Body, io.NopCloser(nil)}
		}
		done <- roundTrip{resp, err}
	}()
	select {
	case rt := <-done:
		return rt.resp, rt.err
	case <-asked.Done():
		return nil, asked.Err() // the request itself goes on
	}
}

func (h *holdOpen) close() {
	h.stop()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.held {
		_ = c.Close()
	}
}

// A notifications/cancelled sent as its own POST, to another replica than
// the one serving the call, with the call's stream left open, cancels the
// call at every revision: the tool's context ends, with the client's
// reason.
func TestNotificationCancelsThroughAnotherReplica(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	cancelled := make(chan error, 1)
	block := tool.Must(tool.New("block", func(ctx context.Context, _ struct{}) (string, error) {
		started <- struct{}{}
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		return "", ctx.Err()
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{block}})
	d2 := s.StartDispatcher(t, dispatch.Config{})
	a, err := url.Parse(replica(t, s.Dispatcher, s.Env.Bus))
	require.NoError(t, err)
	b, err := url.Parse(replica(t, d2, s.Env.Bus))
	require.NoError(t, err)
	for _, v := range mcpserver.ProtocolVersions {
		t.Run(v, func(t *testing.T) {
			rt := newHoldOpen(a, b)
			defer rt.close()
			c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
			cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: b.String(), HTTPClient: &http.Client{Transport: rt}},
				&mcp.ClientSessionOptions{ProtocolVersion: v})
			require.NoError(t, err)
			defer func() { _ = cs.Close() }()
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "block", Arguments: map[string]any{}})
				errc <- err
			}()
			<-started
			cancel()
			require.Error(t, <-errc)
			select {
			case cause := <-cancelled:
				require.ErrorContains(t, cause, "notifications/cancelled")
			case <-time.After(20 * time.Second):
				t.Fatal("the notification did not cancel the call")
			}
		})
	}
}

// A notifications/cancelled reaches only its caller's requests: another
// tenant's, naming the same request id, cancels nothing; the caller's own
// then cancels the call (its reason is the one the tool sees).
func TestNotificationCancelsOnlyTheCallersRequest(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	cancelled := make(chan error, 1)
	block := tool.Must(tool.New("block", func(ctx context.Context, _ struct{}) (string, error) {
		started <- struct{}{}
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		return "", ctx.Err()
	}))
	keys := keyring(t, keyOf{key: "acme-key", tenant: "acme", scopes: []string{"*"}}, keyOf{key: "other-key", tenant: "other", scopes: []string{"*"}})
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{block}, Auth: keys})
	d2 := s.StartDispatcher(t, dispatch.Config{})
	serve := func(d *dispatch.Dispatcher) string {
		mux := http.NewServeMux()
		ms, err := mcpserver.New(d, keys, mcpserver.Config{Version: "test", Bus: s.Env.Bus})
		require.NoError(t, err)
		t.Cleanup(ms.Close)
		ms.Handle(mux)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return srv.URL + mcpserver.Path
	}
	a, b := serve(s.Dispatcher), serve(d2)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a,
			strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"block","arguments":{},`+meta+`}}`))
		if err != nil {
			return
		}
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "block", "Authorization": "Bearer acme-key"} {
			req.Header.Set(k, v)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}()
	<-started
	notify := func(key, reason string) {
		postRPC(t, ctx, b, []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"`+reason+`",`+meta+`}}`),
			"Authorization", "Bearer "+key)
	}
	notify("other-key", "theirs")
	notify("acme-key", "mine")
	select {
	case cause := <-cancelled:
		require.ErrorContains(t, cause, "mine")
	case <-time.After(20 * time.Second):
		t.Fatal("the caller's notification did not cancel its call")
	}
}
