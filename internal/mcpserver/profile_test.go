package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/mcpserver"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// widgetTemplate is the widget template of the pizza tool's spec.
const widgetTemplate = "ui://widget/pizza.html"

// pizzaTool is a tool with a widget template in its spec, its own _meta
// (a ChatGPT key among others, as a tool imported from an Apps SDK server
// has), and a result with a bit of every content kind, structured
// content, and ChatGPT keys in its result's and a block's _meta. It names
// no client: the endpoint renders it for each.
func pizzaTool() *tool.Tool {
	specMeta := func(s *toolwirev1.ToolSpec) {
		s.MetaJson = `{"openai/widgetDescription":"A map of pizza places","acme.example/team":"maps"}`
	}
	return tool.Must(tool.New("pizza_map", func(context.Context, none) (*tool.Result, error) {
		img := tool.Image(pngPixel, "image/png")
		img.MetaJson = `{"openai/widgetSlot":"hero","acme.example/alt":"a red pixel"}`
		link := &toolwirev1.Content{Kind: &toolwirev1.Content_ResourceLink{ResourceLink: &toolwirev1.ResourceLink{
			Uri: "https://pizza.example/list", Name: "list", Title: "All places", Description: "every pizza place"}}}
		return &tool.Result{Content: []*toolwirev1.Content{img, audio(wavSilence, "audio/wav"), link},
			Structured: []byte(`{"places":2}`),
			Meta:       []byte(`{"openai/widgetState":{"zoom":3},"acme.example/trace":"t1"}`)}, nil
	}, tool.WithDescription("Shows pizza places"), tool.ReadOnly(), tool.WithUITemplate(widgetTemplate), specMeta))
}

// headers adds fixed headers to every request.
type headers struct {
	h    http.Header
	base http.RoundTripper
}

func (t headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	return t.base.RoundTrip(r)
}

// connectAs connects a go-sdk client that declares the clientInfo name,
// sending h with every request.
func connectAs(t *testing.T, url, name string, h http.Header) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1.0.0"}, nil)
	hc := &http.Client{Transport: headers{h, http.DefaultTransport}}
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// rendered is what one client got of the pizza tool: its tools/list
// entry's _meta and its tools/call result.
type rendered struct {
	toolMeta map[string]any
	res      *mcp.CallToolResult
}

func listAndCall(t *testing.T, cs *mcp.ClientSession) rendered {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	lt, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var out rendered
	for _, tl := range lt.Tools {
		if tl.Name == "pizza_map" {
			out.toolMeta = tl.Meta
		}
	}
	out.res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "pizza_map", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.False(t, out.res.IsError, "%v", out.res.Content)
	return out
}

// openAIKeys are the openai/* keys anywhere in r: the tool's _meta, the
// result's, its content blocks'.
func (r rendered) openAIKeys(t *testing.T) []string {
	t.Helper()
	var keys []string
	add := func(m map[string]any) {
		for k := range m {
			if strings.HasPrefix(k, "openai/") {
				keys = append(keys, k)
			}
		}
	}
	add(r.toolMeta)
	add(r.res.Meta)
	b, err := json.Marshal(r.res.Content)
	require.NoError(t, err)
	var blocks []struct {
		Meta map[string]any `json:"_meta"`
	}
	require.NoError(t, json.Unmarshal(b, &blocks))
	for _, bl := range blocks {
		add(bl.Meta)
	}
	return keys
}

// kinds are the content kinds of a result, in order.
func kinds(res *mcp.CallToolResult) []string {
	var out []string
	for _, c := range res.Content {
		switch c.(type) {
		case *mcp.TextContent:
			out = append(out, "text")
		case *mcp.ImageContent:
			out = append(out, "image")
		case *mcp.AudioContent:
			out = append(out, "audio")
		case *mcp.ResourceLink:
			out = append(out, "resource_link")
		case *mcp.EmbeddedResource:
			out = append(out, "resource")
		}
	}
	return out
}

// The same call answered to a ChatGPT client, with the widget meta
// generated from the tool's spec and every openai/* key the tool wrote,
// and to a Claude client, without any openai/* key: real go-sdk clients
// declaring their clientInfo, against the real endpoint, one tool.
func TestSameCallRenderedForChatGPTAndClaude(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{pizzaTool()}})
	url := endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default})

	gpt := listAndCall(t, connectAs(t, url, "openai-mcp", nil))
	require.Equal(t, widgetTemplate, gpt.toolMeta["openai/outputTemplate"])
	require.Equal(t, "A map of pizza places", gpt.toolMeta["openai/widgetDescription"])
	require.Equal(t, map[string]any{"zoom": float64(3)}, gpt.res.Meta["openai/widgetState"])
	require.Equal(t, []string{"image", "audio", "resource_link"}, kinds(gpt.res))
	require.ElementsMatch(t, []string{"openai/outputTemplate", "openai/widgetDescription", "openai/widgetState",
		"openai/widgetSlot"}, gpt.openAIKeys(t))

	claude := listAndCall(t, connectAs(t, url, "claude-ai", nil))
	require.Empty(t, claude.openAIKeys(t))
	// Everything else passes: the tool's other keys, toolwire's own.
	require.Equal(t, "maps", claude.toolMeta["acme.example/team"])
	require.Equal(t, "t1", claude.res.Meta["acme.example/trace"])
	require.NotEmpty(t, claude.res.Meta[mcpserver.MetaCallID])
}

// Every shipped profile, reached by a real client declaring a clientInfo
// name of its kind: which _meta passes, and the content fallbacks.
func TestEveryShippedProfile(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{pizzaTool()}})
	url := endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default})
	for _, tc := range []struct {
		profile, client string
		widgets         bool
		kinds           []string
	}{
		{"chatgpt", "openai-mcp", true, []string{"image", "audio", "resource_link"}},
		// Claude gets the structured content as text: the result had no text block.
		{"claude", "claude-ai", false, []string{"image", "audio", "resource_link", "text"}},
		{"vscode", "Visual Studio Code", false, []string{"image", "audio", "resource_link"}},
		// Cursor gets audio and the resource link as text.
		{"cursor", "cursor-vscode", false, []string{"image", "text", "text"}},
		{"plain", "some-agent", false, []string{"image", "audio", "resource_link"}},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			t.Parallel()
			r := listAndCall(t, connectAs(t, url, tc.client, nil))
			require.Equal(t, tc.kinds, kinds(r.res))
			require.Equal(t, tc.widgets, len(r.openAIKeys(t)) > 0, "openai/* keys: %v", r.openAIKeys(t))
			require.Equal(t, "t1", r.res.Meta["acme.example/trace"])
			switch tc.profile {
			case "claude":
				require.JSONEq(t, `{"places":2}`, r.res.Content[3].(*mcp.TextContent).Text)
			case "cursor":
				require.Equal(t, fmt.Sprintf("[audio: audio/wav, %d bytes]", len(wavSilence)), r.res.Content[1].(*mcp.TextContent).Text)
				require.Equal(t, "All places <https://pizza.example/list>: every pizza place",
					r.res.Content[2].(*mcp.TextContent).Text)
			}
		})
	}
}

// The Toolwire-Client-Profile header names the profile, whatever the
// client declares (how an operator names it for a client of an older
// revision, whose clientInfo no request but initialize carries); a name
// that is no configured profile is refused.
func TestProfileHeader(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{pizzaTool()}})
	url := endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default})

	cs := connectAs(t, url, "claude-ai", http.Header{mcpserver.ProfileHeader: {"chatgpt"}})
	require.Equal(t, widgetTemplate, listAndCall(t, cs).toolMeta["openai/outputTemplate"])

	old := mcp.NewClient(&mcp.Implementation{Name: "openai-mcp", Version: "1"}, nil)
	hc := &http.Client{Transport: headers{http.Header{mcpserver.ProfileHeader: {"chatgpt"}}, http.DefaultTransport}}
	ocs, err := old.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-06-18"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ocs.Close() })
	require.Equal(t, widgetTemplate, listAndCall(t, ocs).toolMeta["openai/outputTemplate"])

	bad := connectAs(t, url, "claude-ai", http.Header{mcpserver.ProfileHeader: {"netscape"}})
	_, err = bad.CallTool(t.Context(), &mcp.CallToolParams{Name: "pizza_map", Arguments: map[string]any{}})
	require.ErrorContains(t, err, "no such profile")
}
