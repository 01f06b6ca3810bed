package mcpserver_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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

// endpoint serves the stack's dispatcher as an MCP server with auth.
func endpoint(t *testing.T, d *dispatch.Dispatcher, auth identity.Authenticator) string {
	t.Helper()
	mux := http.NewServeMux()
	ms, err := mcpserver.New(d, auth, mcpserver.Config{Version: "test", Tasks: d.Tasks()})
	require.NoError(t, err)
	ms.Handle(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + mcpserver.Path
}

// bearer adds an Authorization header to every request.
type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

func connect(t *testing.T, url, key, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	hc := &http.Client{Transport: bearer{key, http.DefaultTransport}}
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// A client of each served revision lists the registry's tools and calls
// them, every content kind, through the dispatcher and a worker.
func TestListAndCallAtEachRevision(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), conformanceTools(nil)[:5]...)})
	url := endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default})
	for _, v := range mcpserver.ProtocolVersions {
		t.Run(v, func(t *testing.T) {
			cs := connect(t, url, "any", v)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			lt, err := cs.ListTools(ctx, nil)
			require.NoError(t, err)
			var names []string
			for _, tl := range lt.Tools {
				names = append(names, tl.Name)
			}
			require.Contains(t, names, "echo")
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi " + v}})
			require.NoError(t, err)
			require.False(t, res.IsError, "%v", res.Content)
			require.Equal(t, "hi "+v, res.Content[0].(*mcp.TextContent).Text)
			b, _ := json.Marshal(res.StructuredContent)
			require.JSONEq(t, `{"text":"hi `+v+`"}`, string(b))
			for name, want := range map[string]func(mcp.Content) bool{
				"test_image_content": func(c mcp.Content) bool {
					i, ok := c.(*mcp.ImageContent)
					return ok && i.MIMEType == "image/png" && bytes.Equal(i.Data, pngPixel)
				},
				"test_audio_content": func(c mcp.Content) bool {
					a, ok := c.(*mcp.AudioContent)
					return ok && a.MIMEType == "audio/wav" && bytes.Equal(a.Data, wavSilence)
				},
				"test_embedded_resource": func(c mcp.Content) bool {
					r, ok := c.(*mcp.EmbeddedResource)
					return ok && r.Resource.URI == "test://embedded-resource" && r.Resource.Text == "This is an embedded resource"
				},
			} {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
				require.NoError(t, err, name)
				require.Len(t, res.Content, 1, name)
				require.True(t, want(res.Content[0]), "%s: %#v", name, res.Content[0])
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_multiple_content_types", Arguments: map[string]any{}})
			require.NoError(t, err)
			require.Len(t, res.Content, 3)
		})
	}
}

// A tools/call with a progress token gets the worker's progress as
// notifications; a client that goes away cancels the call, and the cancel
// reaches the worker: the tool's context ends.
func TestProgressAndCancelByDisconnect(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	cancelled := make(chan error, 1)
	slow := tool.Must(tool.New("slow", func(ctx context.Context, in struct {
		Steps int `json:"steps"`
	}) (string, error) {
		for i := range in.Steps {
			tool.Progress(ctx, fmt.Sprintf("step %d", i+1), float64(100*(i+1)/in.Steps))
		}
		if in.Steps > 0 {
			return "done", nil
		}
		started <- struct{}{}
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		return "", ctx.Err()
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), slow)})
	url := endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default})

	// Progress at every revision.
	for _, v := range mcpserver.ProtocolVersions {
		var mu sync.Mutex
		var got []string
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, fmt.Sprintf("%s %.0f/%.0f", r.Params.Message, r.Params.Progress, r.Params.Total))
			}})
		cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: v})
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 3}}
		params.SetProgressToken("p1")
		res, err := cs.CallTool(t.Context(), params)
		require.NoError(t, err, v)
		require.False(t, res.IsError, "%s: %v", v, res.Content)
		// The notifications come before the result unless the host is so
		// slow that the relay's drain ran out; either way all three come.
		progress := func() []string {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(got)
		}
		require.Eventually(t, func() bool { return len(progress()) >= 3 }, 30*time.Second, 10*time.Millisecond, v)
		require.Equal(t, []string{"step 1 33/100", "step 2 66/100", "step 3 100/100"}, progress(), v)
	}

	// At every revision: the SDK ends the request's context only for the
	// stateless one; for the others the HTTP request's end is the sign.
	for _, v := range mcpserver.ProtocolVersions {
		cs := connect(t, url, "any", v)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 0}})
			errc <- err
		}()
		<-started
		cancel()
		require.Error(t, <-errc)
		select {
		case cause := <-cancelled:
			// The SDK closes the stream and sends notifications/cancelled:
			// whichever reaches the endpoint first is the reason.
			require.ErrorContains(t, cause, "the MCP client", v)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the cancel did not reach the worker", v)
		}
	}
}

// A tool's own _meta passes as it is, except what is no object ("null")
// and toolwire's own keys, which a tool cannot set.
func TestToolMetaEdgeCases(t *testing.T) {
	t.Parallel()
	withMeta := tool.Must(tool.New("with_meta", func(_ context.Context, in struct {
		Meta string `json:"meta"`
	}) (*tool.Result, error) {
		return &tool.Result{Content: []*toolwirev1.Content{tool.Text("ok")}, Meta: []byte(in.Meta)}, nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), withMeta)})
	cs := connect(t, endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default}), "any", "")
	for meta, want := range map[string]map[string]any{
		"null": {},
		`{"io.toolwire/error":{"type":"fake"},"mine":1}`: {"mine": float64(1)},
	} {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "with_meta", Arguments: map[string]any{"meta": meta}})
		require.NoError(t, err, meta)
		require.False(t, res.IsError, "%v", res.Content)
		require.NotEmpty(t, res.Meta[mcpserver.MetaCallID])
		delete(res.Meta, mcpserver.MetaCallID)
		delete(res.Meta, "io.modelcontextprotocol/serverInfo")
		require.Equal(t, want, map[string]any(res.Meta), meta)
	}
}

// Without API keys, a Host that is a name (not an IP address, localhost
// or an allowed origin's host) is refused: DNS rebinding sends the
// attacker's name as Host and Origin alike.
func TestOpenAccessRefusesRebindingHosts(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	url := endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default})
	status := func(host string) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		require.NoError(t, err)
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Origin", "http://"+host)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusForbidden, status("evil.example:8080"))
	require.Equal(t, http.StatusOK, status(strings.TrimPrefix(strings.TrimSuffix(url, mcpserver.Path), "http://")))
}

// apiKeys writes an API key file with key for tenant acme, agent bot and
// scopes, and loads it.
func apiKeys(t *testing.T, key string, scopes ...string) *identity.APIKeys {
	t.Helper()
	return keyring(t, keyOf{key: key, tenant: "acme", scopes: scopes})
}

// keyOf is an API key of keyring: its tenant (agent "bot") and scopes.
type keyOf struct {
	key, tenant string
	scopes      []string
}

// keyring authenticates the keys given, from a key file.
func keyring(t *testing.T, keys ...keyOf) *identity.APIKeys {
	t.Helper()
	doc := "keys:\n"
	for _, k := range keys {
		sum := sha256.Sum256([]byte(k.key))
		doc += fmt.Sprintf("  - {sha256: %s, tenant: %s, agent: bot, scopes: [%s]}\n", hex.EncodeToString(sum[:]), k.tenant,
			`"`+strings.Join(k.scopes, `", "`)+`"`)
	}
	f := filepath.Join(t.TempDir(), "keys.yaml")
	require.NoError(t, os.WriteFile(f, []byte(doc), 0o600))
	k, err := identity.LoadAPIKeys(f)
	require.NoError(t, err)
	return k
}

// Without a key (or with a wrong one) the endpoint answers 401 with a
// challenge naming its protected resource metadata, which is served; a
// foreign Origin is refused 403; the key's scopes and the policy decide
// what tools/list shows and tools/call runs.
func TestAuth(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	url := endpoint(t, s.Dispatcher, apiKeys(t, "good-key", "*"))
	post := func(key, origin string) *http.Response {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp
	}
	for _, key := range []string{"", "bad-key"} {
		resp := post(key, "")
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		ch := resp.Header.Get("WWW-Authenticate")
		require.Contains(t, ch, `Bearer resource_metadata="`)
		meta := strings.TrimSuffix(strings.SplitN(ch, `resource_metadata="`, 2)[1], `"`)
		mr, err := http.Get(meta)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.NewDecoder(mr.Body).Decode(&m))
		_ = mr.Body.Close()
		require.Equal(t, url, m["resource"])
	}
	require.Equal(t, http.StatusForbidden, post("good-key", "http://evil.example").StatusCode)

	cs := connect(t, url, "good-key", "")
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "who"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
}

// A key without a tool's scopes calling it is answered 403 naming them
// (insufficient_scope), and the challenges and metadata name the public
// URL when one is configured.
func TestInsufficientScopeAndPublicURL(t *testing.T) {
	t.Parallel()
	deploy := tool.Must(tool.New("deploy", func(context.Context, struct{}) (string, error) { return "ok", nil },
		tool.WithScopes("deploy", "prod")))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), deploy)})
	mux := http.NewServeMux()
	ms, err := mcpserver.New(s.Dispatcher, apiKeys(t, "low-key", "tools", "prod"), mcpserver.Config{PublicURL: "https://tools.example.com", Tasks: s.Env.Bus.Tasks})
	require.NoError(t, err)
	ms.Handle(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"deploy","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+mcpserver.Path, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "deploy", "Authorization": "Bearer low-key"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, `Bearer error="insufficient_scope", scope="deploy", resource_metadata="https://tools.example.com/.well-known/oauth-protected-resource/mcp"`,
		resp.Header.Get("WWW-Authenticate"))

	resp, err = http.Get(srv.URL + mcpserver.MetadataPath)
	require.NoError(t, err)
	defer resp.Body.Close()
	var m map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
	require.Equal(t, "https://tools.example.com/mcp", m["resource"])
}

// A tool the policy denies is absent from tools/list and refused on call,
// as an isError result naming the error's type in _meta.
func TestPolicyThroughMCP(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	a, err := policystore.NewStore(s.Env.Bus, nil).Apply(t.Context(), policystore.Installation,
		[]byte("tenant:\n  default: allow\n  rules:\n    - {id: no-sleep, effect: deny, tools: [sleep], reason: nobody sleeps here}\n"), policystore.ApplyOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Policies.Wait(t.Context(), policystore.Installation, a.Version.Version, a.Revision))
	cs := connect(t, endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default}), "any", "")
	lt, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	for _, tl := range lt.Tools {
		require.NotEqual(t, "sleep", tl.Name)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"duration": "1ms"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "nobody sleeps here")
	require.Equal(t, "ERROR_TYPE_PERMISSION_DENIED", res.Meta[mcpserver.MetaError].(map[string]any)["type"])
	require.NotEmpty(t, res.Meta[mcpserver.MetaCallID])

	_, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "no_such_tool"})
	require.ErrorContains(t, err, `unknown tool "no_such_tool"`)
}

// A tools/call naming an ended toolwire session in its _meta is refused
// SESSION_INACTIVE (an isError result); the same call in a live session,
// or in none, runs.
func TestEndedSessionThroughMCP(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	s.EndSession(t, "s-end", "the user left")
	cs := connect(t, endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default}), "any", "")
	callIn := func(session any) *mcp.CallToolResult {
		p := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}
		if session != nil {
			p.Meta = mcp.Meta{mcpserver.MetaSession: session}
		}
		res, err := cs.CallTool(t.Context(), p)
		require.NoError(t, err)
		return res
	}
	res := callIn("s-end")
	require.True(t, res.IsError)
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "the user left")
	require.Equal(t, "ERROR_TYPE_SESSION_INACTIVE", res.Meta[mcpserver.MetaError].(map[string]any)["type"])
	require.False(t, callIn("s-live").IsError)
	require.False(t, callIn(nil).IsError)

	_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"},
		Meta: mcp.Meta{mcpserver.MetaSession: 42}})
	require.ErrorContains(t, err, mcpserver.MetaSession+" must be a string")
}

// A call over its soft latency budget says so in its result's _meta, as
// the API's answer does in its meta; a call within it does not.
func TestLatencyBudgetThroughMCP(t *testing.T) {
	t.Parallel()
	nap := tool.Must(tool.New("nap", func(ctx context.Context, _ struct{}) (string, error) {
		tm := time.NewTimer(100 * time.Millisecond)
		defer tm.Stop()
		select {
		case <-tm.C:
			return "awake", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}, tool.WithLatencyBudget(time.Millisecond)))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), nap)})
	cs := connect(t, endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default}), "any", "")
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "nap", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.False(t, res.IsError, "a budget never fails a call")
	over, ok := res.Meta[mcpserver.MetaLatencyBudget].(map[string]any)
	require.True(t, ok, "_meta: %v", res.Meta)
	require.Equal(t, float64(1), over["budget_ms"])
	require.GreaterOrEqual(t, over["elapsed_ms"], float64(100))
	require.Equal(t, "spec", over["source"])

	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	require.NoError(t, err)
	require.NotContains(t, res.Meta, mcpserver.MetaLatencyBudget)
}

// A tools/list naming a toolwire session in its _meta leaves out the
// tools the session's mode forbids outright; the list of another session,
// or of none, has them; a session that is not a string is invalid params.
func TestModeHidesToolsThroughMCP(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	s.ApplyPolicy(t, "tenant:\n  default: allow\nmodes:\n  voice:\n    rules:\n      - {id: voice-no-sleep, effect: deny, tools: [sleep]}\n  text: {}\n")
	s.SetMode(t, "s-voice", "voice")
	s.SetMode(t, "s-text", "text")
	cs := connect(t, endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default}), "any", "")
	names := func(session any) []string {
		var p *mcp.ListToolsParams
		if session != nil {
			p = &mcp.ListToolsParams{Meta: mcp.Meta{mcpserver.MetaSession: session}}
		}
		lt, err := cs.ListTools(t.Context(), p)
		require.NoError(t, err)
		var out []string
		for _, tl := range lt.Tools {
			out = append(out, tl.Name)
		}
		return out
	}
	require.NotContains(t, names("s-voice"), "sleep")
	require.Contains(t, names("s-voice"), "echo")
	require.Contains(t, names("s-text"), "sleep")
	require.Contains(t, names(nil), "sleep")

	_, err := cs.ListTools(t.Context(), &mcp.ListToolsParams{Meta: mcp.Meta{mcpserver.MetaSession: 42}})
	require.ErrorContains(t, err, mcpserver.MetaSession+" must be a string")
}

// A tools/call naming a toolwire session whose mode forbids the tool is
// refused MODE_RESTRICTED (an isError result naming the mode and the
// rule), and the tool never runs; the same call in a session of another
// mode, or in none, runs; what the mode allows runs in the session.
func TestModeRestrictsCallsThroughMCP(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	s.ApplyPolicy(t, "tenant:\n  default: allow\nmodes:\n  voice:\n    rules:\n      - {id: voice-no-sleep, effect: deny, tools: [sleep], reason: no pauses on a call}\n  text: {}\n")
	s.SetMode(t, "s-voice", "voice")
	s.SetMode(t, "s-text", "text")
	cs := connect(t, endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default}), "any", "")
	callIn := func(name string, args map[string]any, session string) *mcp.CallToolResult {
		p := &mcp.CallToolParams{Name: name, Arguments: args}
		if session != "" {
			p.Meta = mcp.Meta{mcpserver.MetaSession: session}
		}
		res, err := cs.CallTool(t.Context(), p)
		require.NoError(t, err)
		return res
	}
	nap := map[string]any{"duration": "1ms"}
	res := callIn("sleep", nap, "s-voice")
	require.True(t, res.IsError)
	require.Equal(t, "ERROR_TYPE_MODE_RESTRICTED", res.Meta[mcpserver.MetaError].(map[string]any)["type"])
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, `mode "voice" forbids this call of "sleep" (rule "voice-no-sleep"): no pauses on a call`)
	require.False(t, callIn("echo", map[string]any{"text": "hi"}, "s-voice").IsError, "what the mode allows runs")
	require.False(t, callIn("sleep", nap, "s-text").IsError, "another mode does not forbid it")
	require.False(t, callIn("sleep", nap, "").IsError, "no session, no mode")
}

// Under the tenant's sessions.required, a tools/call whose _meta names no
// toolwire session is refused PERMISSION_DENIED (an isError result naming
// the rule) with a real key; under default_mode its tools/list leaves out
// what that mode hides; one naming a session runs; under opened_only, a
// session nobody opened is refused SESSION_INACTIVE.
func TestSessionRulesThroughMCP(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	s.ApplyPolicy(t, "tenant:\n  default: allow\nmodes:\n  voice:\n    rules:\n      - {id: voice-no-sleep, effect: deny, tools: [sleep]}\n"+
		"sessions: {required: true, opened_only: true, default_mode: voice}\n")
	s.SetMode(t, "s-open", "")
	cs := connect(t, endpoint(t, s.Dispatcher, keyring(t, keyOf{key: "bot-key", tenant: identity.Default.Tenant, scopes: []string{"tools"}})), "bot-key", "")
	callIn := func(session string) *mcp.CallToolResult {
		p := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}
		if session != "" {
			p.Meta = mcp.Meta{mcpserver.MetaSession: session}
		}
		res, err := cs.CallTool(t.Context(), p)
		require.NoError(t, err)
		return res
	}
	res := callIn("")
	require.True(t, res.IsError)
	require.Equal(t, "ERROR_TYPE_PERMISSION_DENIED", res.Meta[mcpserver.MetaError].(map[string]any)["type"])
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "sessions.required")
	res = callIn("s-made-up")
	require.True(t, res.IsError)
	require.Equal(t, "ERROR_TYPE_SESSION_INACTIVE", res.Meta[mcpserver.MetaError].(map[string]any)["type"])
	require.False(t, callIn("s-open").IsError, "an opened session runs")

	lt, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	var listed []string
	for _, tl := range lt.Tools {
		listed = append(listed, tl.Name)
	}
	require.Contains(t, listed, "echo")
	require.NotContains(t, listed, "sleep", "the default mode hides it")
}
