package profiles_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/profiles"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A client's name is bounded before it is matched: ClientName cuts a
// 300 KiB name to MaxClientName+1 bytes, and a name longer than
// MaxClientName matches no client_names rule (64 profiles of 64 patterns
// of the longest length do not see it), only a profile of capability
// rules or the default; a name of MaxClientName bytes still matches.
func TestLongClientNameIsBounded(t *testing.T) {
	t.Parallel()
	long := "chatgpt" + strings.Repeat("a", 300<<10)
	cut := profiles.ClientName(long)
	require.Len(t, cut, profiles.MaxClientName+1)
	require.Equal(t, "short", profiles.ClientName("short"))

	var b strings.Builder
	b.WriteString("profiles:\n")
	pat := strings.Repeat("*a", 128)[:256]
	for i := range 14 { // as many as a file of MaxFileBytes holds
		fmt.Fprintf(&b, "- name: p%d\n  match: {client_names: [", i)
		for j := range 64 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", pat)
		}
		b.WriteString("]}\n")
	}
	b.WriteString("- name: caps\n  match: {capabilities: [elicitation]}\n")
	s, err := profiles.Parse([]byte(b.String()))
	require.NoError(t, err)

	c := client(cut)
	require.Equal(t, "plain", s.Match(c).Name, "a name too long matches no name rule")
	c.Capabilities["elicitation"] = true
	require.Equal(t, "caps", s.Match(c).Name, "capability rules still hold")
	require.Equal(t, "chatgpt", s.Match(client("chatgpt"+strings.Repeat("b", profiles.MaxClientName-7))).Name)
	require.Equal(t, "p0", s.Match(client(strings.Repeat("a", 200))).Name)

	// A pattern longer than the bound is refused.
	_, err = profiles.Parse([]byte(`profiles: [{name: x, match: {client_names: ["` + strings.Repeat("a", 257) + `"]}}]`))
	require.ErrorContains(t, err, "longer than 256 bytes")
}

// openai/* keys reach only a profile that asks for them: widgets openai
// or an allow naming openai/* or an openai/ key; every shipped profile
// but chatgpt, an operator profile without meta rules and one allowing
// "*" get none.
func TestOpenAIKeysOnlyWhereAsked(t *testing.T) {
	t.Parallel()
	s, err := profiles.Parse([]byte(`profiles:
- {name: bare}
- {name: star, meta: {allow: ["*"]}}
- {name: ns, meta: {allow: ["openai/*"]}}
- {name: one, meta: {allow: ["openai/widgetState"]}}
- {name: gadget, widgets: openai, meta: {deny: ["openai/widgetSlot"]}}
`))
	require.NoError(t, err)
	want := map[string][]string{"chatgpt": {"openai/a", "openai/widgetState", "openai/widgetSlot"},
		"ns": {"openai/a", "openai/widgetState", "openai/widgetSlot"}, "one": {"openai/widgetState"},
		"gadget": {"openai/a", "openai/widgetState"}}
	for _, name := range s.Names() {
		p, _ := s.Named(name)
		var got []string
		for _, k := range []string{"openai/a", "openai/widgetState", "openai/widgetSlot"} {
			if p.Passes(k) {
				got = append(got, k)
			}
		}
		require.Equal(t, want[name], got, name)
		require.True(t, p.Passes("io.toolwire/call_id"), name)
	}
	bare, _ := s.Named("bare")
	require.True(t, bare.Passes("acme.example/k"))
}

// The widget meta generated from the spec respects deny; a _meta that is
// not a JSON object is none; numbers are kept as written.
func TestWidgetMetaAndOddMeta(t *testing.T) {
	t.Parallel()
	s, err := profiles.Parse([]byte(`profiles: [{name: g, widgets: openai, meta: {deny: ["openai/outputTemplate"]}}]`))
	require.NoError(t, err)
	g, _ := s.Named("g")
	spec := &toolwirev1.ToolSpec{UiTemplate: "ui://w/a.html"}
	require.Nil(t, g.ToolMeta(nil, spec), "denied: not generated")
	gpt, _ := profiles.Shipped().Named(profiles.ChatGPT)
	require.Equal(t, map[string]json.RawMessage{"n": raw(`12345678901234567890`)},
		gpt.ToolMeta(map[string]json.RawMessage{"n": raw(`12345678901234567890`), "openai/outputTemplate": raw(`"ui://x"`)},
			&toolwirev1.ToolSpec{}), "a tool-written template is dropped without ui_template too")

	for _, odd := range []string{`[1,2]`, `"s"`, `null`, `7`, `{`} {
		out := gpt.Response(&toolwirev1.ToolResponse{MetaJson: odd})
		require.Empty(t, out.GetMetaJson(), odd)
	}
}

// An input request's params are rendered: their _meta, each sampling
// message's and each content block's.
func TestInputParams(t *testing.T) {
	t.Parallel()
	claude, _ := profiles.Shipped().Named(profiles.Claude)
	in := `{"_meta":{"openai/a":1,"k":2},"message":"m","messages":[` +
		`{"role":"user","_meta":{"openai/b":1},"content":{"type":"text","text":"t","_meta":{"openai/c":1,"k":3}}},` +
		`{"role":"user","content":[{"type":"text","text":"u","_meta":{"openai/d":1}}]}]}`
	out := claude.InputParams(in)
	require.NotContains(t, out, "openai/")
	require.JSONEq(t, `{"_meta":{"k":2},"message":"m","messages":[`+
		`{"role":"user","content":{"type":"text","text":"t","_meta":{"k":3}}},`+
		`{"role":"user","content":[{"type":"text","text":"u"}]}]}`, out)
	gpt, _ := profiles.Shipped().Named(profiles.ChatGPT)
	require.JSONEq(t, in, gpt.InputParams(in))
	require.Equal(t, in, (*profiles.Profile)(nil).InputParams(in))
	require.Equal(t, `[1]`, claude.InputParams(`[1]`))
}

// Validate's error is the same each time (fields in a fixed order), and
// an unknown name does not list the configured ones.
func TestValidateDeterministic(t *testing.T) {
	t.Parallel()
	src := `profiles: [{name: a, fallbacks: {image: x, audio: y, resource_link: z, embedded_resource: w, structured: v}}]`
	_, first := profiles.Parse([]byte(src))
	require.ErrorContains(t, first, "fallbacks.image")
	for range 20 {
		_, err := profiles.Parse([]byte(src))
		require.Equal(t, first.Error(), err.Error())
	}
	s, err := profiles.Parse([]byte(`profiles: [{name: secret-tenant-x}]`))
	require.NoError(t, err)
	_, err = s.Select("nope")
	require.ErrorIs(t, err, profiles.ErrUnknown)
	require.NotContains(t, err.Error(), "secret-tenant-x")
	require.NotContains(t, err.Error(), "chatgpt")
}
