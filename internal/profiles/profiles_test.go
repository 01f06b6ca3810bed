package profiles_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/profiles"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func client(name string, caps ...string) profiles.Client {
	c := profiles.Client{Name: name, Capabilities: map[string]bool{}}
	for _, k := range caps {
		c.Capabilities[k] = true
	}
	return c
}

// The shipped profiles are valid and matched by the clientInfo names of
// their clients, case-insensitively; any other client gets plain.
func TestShippedMatch(t *testing.T) {
	t.Parallel()
	s := profiles.Shipped()
	require.Equal(t, []string{"chatgpt", "claude", "vscode", "cursor", "plain"}, s.Names())
	for name, want := range map[string]string{
		"openai-mcp": "chatgpt", "ChatGPT": "chatgpt", "claude-ai": "claude", "Claude Code": "claude",
		"Visual Studio Code": "vscode", "GitHub Copilot": "vscode", "cursor-vscode": "cursor",
		"mcp-inspector": "plain", "": "plain",
	} {
		require.Equal(t, want, s.Match(client(name)).Name, name)
	}
	require.Equal(t, "plain", s.Default().Name)
}

// The example of docs/mcp.md loads; its profiles come first, in order,
// replace the shipped one of their name, and need every rule to hold.
func TestExampleFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join("..", "..", "docs", "examples", "profiles.yaml")
	s, err := profiles.Load(file)
	require.NoError(t, err)
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "mcp.md"))
	require.NoError(t, err)
	require.Contains(t, string(doc), "```yaml\n"+string(src)+"```", "docs/mcp.md shows the example as it is")
	require.Equal(t, []string{"acme-agent", "raycast", "plain", "chatgpt", "claude", "vscode", "cursor"}, s.Names())
	require.Equal(t, "acme-agent", s.Match(client("acme-agent/2")).Name)
	require.Equal(t, "raycast", s.Match(client("Raycast", "elicitation")).Name)
	require.Equal(t, "plain", s.Match(client("Raycast")).Name, "without elicitation")
	p := s.Default()
	require.False(t, p.Passes("acme.internal/x"))
	require.False(t, p.Passes("openai/outputTemplate"))
	require.True(t, p.Passes("acme.example/x"))
	a, _ := s.Named("acme-agent")
	require.True(t, a.Passes("acme.example/x"))
	require.False(t, a.Passes("other/x"))
	require.True(t, a.Passes("io.toolwire/call_id"), "toolwire's own keys always pass")
}

// A profiles file is refused whole, naming what is wrong: unknown keys,
// invalid profiles, twice a name, a default that is no profile, too large.
func TestParseRefuses(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]string{
		"profiles: [{name: a, colour: red}]":                      "unknown field",
		"profiles: [{name: A}]":                                   "must match",
		"profiles: [{name: a}, {name: a}]":                        "named twice",
		"profiles: [{name: a, match: {client_names: ['[']}}]":     "syntax error",
		"profiles: [{name: a, meta: {deny: ['open*ai']}}]":        "a pattern is a key",
		"profiles: [{name: a, fallbacks: {image: link}}]":         "fallbacks.image",
		"profiles: [{name: a, widgets: gemini}]":                  "widgets",
		"default: nobody":                                         "names no profile",
		"profiles: [{name: a, meta: {allow: ['']}}]":              "empty",
		"profiles: " + strings.Repeat("x", profiles.MaxFileBytes): "larger than",
	} {
		_, err := profiles.Parse([]byte(src))
		require.ErrorContains(t, err, want, src)
	}
	_, err := profiles.Load(filepath.Join(t.TempDir(), "none.yaml"))
	require.Error(t, err)
	big := filepath.Join(t.TempDir(), "big.yaml")
	require.NoError(t, os.WriteFile(big, []byte(strings.Repeat("#", profiles.MaxFileBytes+10)), 0o600))
	_, err = profiles.Load(big)
	require.ErrorContains(t, err, "larger than")
}

// Select takes only configured names, and does not echo a long one whole.
func TestSelect(t *testing.T) {
	t.Parallel()
	s := profiles.Shipped()
	p, err := s.Select("")
	require.NoError(t, err)
	require.Nil(t, p)
	p, err = s.Select("cursor")
	require.NoError(t, err)
	require.Equal(t, "cursor", p.Name)
	_, err = s.Select(strings.Repeat("z", 1000))
	require.ErrorIs(t, err, profiles.ErrUnknown)
	require.Less(t, len(err.Error()), 200)
}

// Response renders a copy: _meta filtered at every level, fallbacks; the
// response given is unchanged, and a nil profile changes nothing.
func TestResponse(t *testing.T) {
	t.Parallel()
	resp := &toolwirev1.ToolResponse{Ok: true, MetaJson: `{"openai/a":1,"b":2}`, StructuredJson: `{"n":1}`,
		Content: []*toolwirev1.Content{
			{Kind: &toolwirev1.Content_Image{Image: &toolwirev1.ImageContent{Data: []byte("abc"), MimeType: "image/png"}},
				MetaJson: `{"openai/x":1}`},
			{Kind: &toolwirev1.Content_Resource{Resource: &toolwirev1.EmbeddedResource{Uri: "f://a", MimeType: "text/plain",
				Contents: &toolwirev1.EmbeddedResource_Text{Text: "inline"}, MetaJson: `{"openai/y":1,"c":3}`}}},
		}}
	s, err := profiles.Parse([]byte(`profiles: [{name: t, meta: {deny: ["openai/*"]}, fallbacks: {image: text, structured: text}}]`))
	require.NoError(t, err)
	p, _ := s.Named("t")
	out := p.Response(resp)
	require.JSONEq(t, `{"b":2}`, out.GetMetaJson())
	require.Equal(t, "[image: image/png, 3 bytes]", out.GetContent()[0].GetText().GetText())
	require.Empty(t, out.GetContent()[0].GetMetaJson(), "nothing of the block's _meta passes")
	require.JSONEq(t, `{"c":3}`, out.GetContent()[1].GetResource().GetMetaJson())
	// The image became text: a text block is there, the structured content is not added.
	require.Len(t, out.GetContent(), 2)
	require.NotNil(t, resp.GetContent()[0].GetImage(), "the response given is not changed")
	require.JSONEq(t, `{"openai/a":1,"b":2}`, resp.GetMetaJson())
	require.Same(t, resp, (*profiles.Profile)(nil).Response(resp))
}

// ToolMeta generates the widget meta from the spec for a profile that
// asks for it, replacing the tool's own key; others get none.
func TestToolMetaWidgets(t *testing.T) {
	t.Parallel()
	s := profiles.Shipped()
	spec := &toolwirev1.ToolSpec{UiTemplate: "ui://w/a.html"}
	own := map[string]json.RawMessage{"openai/outputTemplate": raw(`"ui://tool/wrote.html"`), "k": raw(`1`)}
	gpt, _ := s.Named(profiles.ChatGPT)
	require.Equal(t, map[string]json.RawMessage{"openai/outputTemplate": raw(`"ui://w/a.html"`), "k": raw(`1`)}, gpt.ToolMeta(own, spec))
	claude, _ := s.Named(profiles.Claude)
	require.Equal(t, map[string]json.RawMessage{"k": raw(`1`)}, claude.ToolMeta(own, spec))
	require.Nil(t, claude.ToolMeta(map[string]json.RawMessage{"openai/x": raw(`1`)}, spec))
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }
