package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/mcpserver"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A plain tools/call of the stateless revision is answered on the fast
// path (a JSON response, not the SDK's event stream), with the same
// result, error and HTTP status as the SDK path answers the same call.
func TestFastPathAnswersAsTheSDK(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	url := endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default})
	post := func(params map[string]any) (status int, contentType string, msg map[string]any) {
		t.Helper()
		return postCall(t, url, params, nil)
	}
	for name, params := range map[string]func() map[string]any{
		"result": func() map[string]any {
			return map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}}
		},
		"tool error": func() map[string]any {
			return map[string]any{"name": "fail", "arguments": map[string]any{"message": "no"}}
		},
		"unknown tool": func() map[string]any { return map[string]any{"name": "nope", "arguments": map[string]any{}} },
		"bad args":     func() map[string]any { return map[string]any{"name": "echo", "arguments": map[string]any{"text": 1}} },
		// Keys that encoding/json would fold onto known ones: the SDK
		// reads them as written (these go to it).
		"folded keys": func() map[string]any {
			return map[string]any{"name": "echo", "arguments": map[string]any{"text": "benign"}, "Arguments": map[string]any{"text": "EVIL"}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			fastStatus, fastType, fast := post(params())
			if name != "folded keys" {
				require.Equal(t, "application/json", fastType, "the fast path answers")
			}
			// A field the fast path does not know sends the call to the SDK.
			p := params()
			p["x-unknown"] = true
			sdkStatus, sdkType, sdk := post(p)
			if sdk["error"] == nil {
				// (The SDK writes its errors as JSON too.)
				require.NotEqual(t, "application/json", sdkType, "the SDK answers")
			}
			require.Equal(t, sdkStatus, fastStatus)
			require.Equal(t, sdk, fast)
			require.NotContains(t, fmt.Sprint(fast), "EVIL")
		})
	}
}

// postCall posts a tools/call of the stateless revision with params (its
// _meta's keys added to the revision's), sending h too, and returns the
// HTTP status, the content type and the JSON-RPC message (the event
// stream's last one), less the call's id.
func postCall(t *testing.T, url string, params map[string]any, h http.Header) (status int, contentType string, msg map[string]any) {
	t.Helper()
	meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{}}
	if m, ok := params["_meta"].(map[string]any); ok {
		for k, v := range m {
			meta[k] = v
		}
	}
	params["_meta"] = meta
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": params["name"].(string)} {
		req.Header.Set(k, v)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for line := range strings.SplitSeq(string(out), "\n") {
			if data, ok := strings.CutPrefix(line, "data:"); ok && strings.TrimSpace(data) != "" {
				out = []byte(data)
			}
		}
	}
	require.NoError(t, json.Unmarshal(out, &msg), string(out))
	if r, ok := msg["result"].(map[string]any); ok {
		delete(r["_meta"].(map[string]any), "io.toolwire/call_id")
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), msg
}

// A tools/call naming a model (the Toolwire-Model header, or
// io.toolwire/model in its _meta) or a profile (its header) is answered on
// the fast path, with what the SDK path answers: a tool the model's
// toolset substitutes or hides is refused, a call is held to the
// variant's schema the model was offered, and the profile named renders
// the result. A model or profile the SDK path refuses is left to it.
func TestFastPathAnswersAsTheSDKForAModel(t *testing.T) {
	t.Parallel()
	edit := tool.Must(tool.New("edit", func(context.Context, mcpEditIn) (string, error) { return "edited", nil }))
	patch := tool.Must(tool.New("apply_patch", func(context.Context, mcpPatchIn) (string, error) { return "patched", nil }))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{edit, patch, pizzaTool()}})
	s.ApplyPolicy(t, toolsetsPolicy)
	url := endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default})
	gpt := http.Header{mcpserver.ModelHeader: {"gpt-5.1"}}
	claudeMeta := map[string]any{mcpserver.MetaModel: "claude-sonnet-4-5"}
	profile := func(name string) http.Header { return http.Header{mcpserver.ProfileHeader: {name}} }
	for name, c := range map[string]struct {
		h      http.Header
		params func() map[string]any
		fast   bool   // answered on the fast path (a result, not an event stream)
		want   string // in the answer
	}{
		"variant offered": {gpt, func() map[string]any {
			return map[string]any{"name": "apply_patch", "arguments": map[string]any{"patch": "x"}}
		}, true, "patched"},
		"outside the variant": {gpt, func() map[string]any {
			return map[string]any{"name": "apply_patch", "arguments": map[string]any{"patch": "x", "strip": 1}}
		}, false, "toolset gpt"},
		"substituted": {gpt, func() map[string]any {
			return map[string]any{"name": "edit", "arguments": map[string]any{"path": "a"}}
		}, true, "toolset gpt offers apply_patch instead"},
		"hidden, model in _meta": {nil, func() map[string]any {
			return map[string]any{"name": "apply_patch", "arguments": map[string]any{"patch": "x"}, "_meta": claudeMeta}
		}, true, "hidden by toolset claude"},
		"header and _meta agree": {http.Header{mcpserver.ModelHeader: {"claude-sonnet-4-5"}}, func() map[string]any {
			return map[string]any{"name": "edit", "arguments": map[string]any{"path": "a"}, "_meta": claudeMeta}
		}, true, "edited"},
		"header and _meta disagree": {gpt, func() map[string]any {
			return map[string]any{"name": "edit", "arguments": map[string]any{"path": "a"}, "_meta": claudeMeta}
		}, false, "name different models"},
		"not a model name": {http.Header{mcpserver.ModelHeader: {"gpt 5"}}, func() map[string]any {
			return map[string]any{"name": "edit", "arguments": map[string]any{"path": "a"}}
		}, false, "not a model name"},
		"model not a string": {nil, func() map[string]any {
			return map[string]any{"name": "edit", "arguments": map[string]any{"path": "a"}, "_meta": map[string]any{mcpserver.MetaModel: 5}}
		}, false, "must be a string"},
		"profile chatgpt": {profile("chatgpt"), func() map[string]any {
			return map[string]any{"name": "pizza_map", "arguments": map[string]any{}}
		}, true, "openai/widgetState"},
		"profile claude, and a model": {http.Header{mcpserver.ProfileHeader: {"claude"}, mcpserver.ModelHeader: {"claude-sonnet-4-5"}}, func() map[string]any {
			return map[string]any{"name": "pizza_map", "arguments": map[string]any{}}
		}, true, "acme.example/trace"},
		"unknown profile": {profile("nope"), func() map[string]any {
			return map[string]any{"name": "pizza_map", "arguments": map[string]any{}}
		}, false, "nope"},
	} {
		t.Run(name, func(t *testing.T) {
			fastStatus, fastType, fast := postCall(t, url, c.params(), c.h)
			if c.fast {
				require.Equal(t, "application/json", fastType, "the fast path answers")
			}
			p := c.params()
			p["x-unknown"] = true // sends the call to the SDK
			sdkStatus, sdkType, sdk := postCall(t, url, p, c.h)
			if sdk["error"] == nil {
				require.NotEqual(t, "application/json", sdkType, "the SDK answers")
			}
			require.Equal(t, sdkStatus, fastStatus)
			require.Equal(t, sdk, fast)
			require.Contains(t, fmt.Sprint(fast), c.want)
			if v := c.h.Get(mcpserver.ProfileHeader); v != "" && v != "chatgpt" {
				require.NotContains(t, fmt.Sprint(fast), "openai/", "openai/* keys reach only ChatGPT's profile")
			}
		})
	}
}

// A client listening for list changes (subscriptions/listen) is told when
// the registry's tools change — here, a tool published on another
// connection, as a worker starting elsewhere would.
func TestToolListChangedReachesListeners(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	url := endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen",
		"params": map[string]any{"notifications": map[string]any{"toolsListChanged": true},
			"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
				"io.modelcontextprotocol/clientCapabilities": map[string]any{}}}})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	frames := make(chan string, 16)
	go func() {
		defer close(frames)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				frames <- data
			}
		}
	}()
	// Publish until the notification comes: the listen may be taken in
	// after a first publish.
	added := tool.Must(tool.New("added", func(context.Context, struct{}) (string, error) { return "", nil }))
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	n := 0
	for {
		select {
		case f, ok := <-frames:
			require.True(t, ok, "the listen stream ended")
			if strings.Contains(f, "notifications/tools/list_changed") {
				return
			}
		case <-tick.C:
			n++
			spec := added.Spec()
			spec.Description = fmt.Sprintf("version %d", n)
			_, err := registry.Publish(ctx, s.Env.Bus.Registry, []*toolwirev1.ToolSpec{spec})
			require.NoError(t, err)
		case <-ctx.Done():
			t.Fatal("no notifications/tools/list_changed")
		}
	}
}

// A result cut to its inline limits comes with a resource_link to the
// whole output, which resources/read reads, a page at a time, on the
// same endpoint: nothing is cut silently.
func TestLargeResultIsALinkToTheWhole(t *testing.T) {
	t.Parallel()
	var want strings.Builder
	for i := range 150000 {
		fmt.Fprintf(&want, "line %06d of the big output\n", i)
	}
	big := tool.Must(tool.New("big", func(context.Context, struct{}) (string, error) { return want.String(), nil },
		tool.WithLimits(&toolwirev1.Limits{MaxOutputBytes: 4096})))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), big)})
	cs := connect(t, endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default}), "any", "2026-07-28")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "big", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.Less(t, len(res.Content[0].(*mcp.TextContent).Text), 8192, "the inline result is cut")
	link, ok := res.Content[len(res.Content)-1].(*mcp.ResourceLink)
	require.True(t, ok, "the last block links to the whole: %#v", res.Content)
	var got strings.Builder
	pages := 0
	for uri := link.URI; uri != ""; pages++ {
		r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		require.NoError(t, err)
		got.WriteString(r.Contents[0].Text)
		uri, _ = r.Meta[mcpserver.MetaNext].(string)
	}
	require.Greater(t, pages, 1, "read in pages")
	require.Equal(t, want.String(), got.String())

	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "toolwire://calls/01ARZ3NDEKTSV4RRFFQ69G5FAV/output"})
	require.Error(t, err, "an unknown call's output")
}
