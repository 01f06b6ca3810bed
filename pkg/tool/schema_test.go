package tool_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/pkg/tool"
)

func TestInputSchemaFromStruct(t *testing.T) {
	t.Parallel()

	tl, err := tool.New("search", search)
	require.NoError(t, err)
	s := schemaOf(t, tl.Spec().GetInputSchemaJson())

	require.Equal(t, "object", s["type"])
	require.Equal(t, false, s["additionalProperties"], "unknown arguments are rejected")
	require.ElementsMatch(t, []any{"query", "exact"}, s["required"], "omitempty and omitzero fields are optional")

	props := s["properties"].(map[string]any)
	for name, want := range map[string]map[string]any{
		"query": {"type": "string", "description": "what to look for"},
		"limit": {"type": "integer", "description": "most results to return"},
		"tags":  {"type": []any{"null", "array"}, "items": map[string]any{"type": "string"}},
		"exact": {"type": "boolean"},
		"score": {"type": []any{"null", "number"}},
	} {
		require.Equal(t, want, props[name], "property %s", name)
	}
	require.Len(t, props, 5)
}

func TestInputSchemaKinds(t *testing.T) {
	t.Parallel()

	type nested struct {
		When time.Time       `json:"when"`
		Raw  json.RawMessage `json:"raw"`
		Any  any             `json:"any"`
		Skip string          `json:"-"`
	}
	for _, tt := range []struct {
		name string
		tool *tool.Tool
		want string
	}{
		{
			name: "raw message accepts any object",
			tool: tool.Must(tool.New("t", func(context.Context, json.RawMessage) (string, error) { return "", nil })),
			want: `{"type":"object"}`,
		},
		{
			name: "pointer to struct is the struct",
			tool: tool.Must(tool.New("t", func(context.Context, *searchOut) (string, error) { return "", nil })),
			want: `{"type":"object","required":["hits"],"properties":{"hits":{"type":["null","array"],"items":{"type":"string"}}},"additionalProperties":false}`,
		},
		{
			name: "map with string keys",
			tool: tool.Must(tool.New("t", func(context.Context, map[string]int) (string, error) { return "", nil })),
			want: `{"type":"object","additionalProperties":{"type":"integer"}}`,
		},
		{
			name: "well-known and raw fields",
			tool: tool.Must(tool.New("t", func(context.Context, nested) (string, error) { return "", nil })),
			want: `{"type":"object","required":["when","raw","any"],"properties":{"when":{"type":"string"},"raw":true,"any":true},"additionalProperties":false}`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.JSONEq(t, tt.want, tt.tool.Spec().GetInputSchemaJson())
		})
	}
}

func TestInputSchemaKeepsFieldOrder(t *testing.T) {
	t.Parallel()

	type ordered struct {
		Zeta  string `json:"zeta"`
		Alpha string `json:"alpha"`
	}
	tl := tool.Must(tool.New("t", func(context.Context, ordered) (string, error) { return "", nil }))
	require.Equal(t,
		`{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"string"}},"required":["zeta","alpha"],"additionalProperties":false}`,
		tl.Spec().GetInputSchemaJson(), "the schema text is stable, so its content hash is too")
}

func TestOutputSchema(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		name string
		tool *tool.Tool
		want string // "" = no output schema
	}{
		{
			name: "struct",
			tool: tool.Must(tool.New("t", search)),
			want: `{"type":"object","required":["hits"],"properties":{"hits":{"type":["null","array"],"items":{"type":"string"}}},"additionalProperties":false}`,
		},
		{
			name: "pointer to struct",
			tool: tool.Must(tool.New("t", func(context.Context, searchIn) (*searchOut, error) { return nil, nil })),
			want: `{"type":"object","required":["hits"],"properties":{"hits":{"type":["null","array"],"items":{"type":"string"}}},"additionalProperties":false}`,
		},
		{
			name: "string",
			tool: tool.Must(tool.New("t", func(context.Context, searchIn) (string, error) { return "", nil })),
		},
		{
			name: "result",
			tool: tool.Must(tool.New("t", func(context.Context, searchIn) (*tool.Result, error) { return nil, nil })),
		},
		{
			name: "map",
			tool: tool.Must(tool.New("t", func(context.Context, searchIn) (map[string]int, error) { return nil, nil })),
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.tool.Spec().GetOutputSchemaJson()
			if tt.want == "" {
				require.Empty(t, got)
				return
			}
			require.JSONEq(t, tt.want, got)
		})
	}
}

// A secret field is marked wherever it sits: nested structs, slices and
// map values.
func TestSecretFieldsAreMarkedEverywhere(t *testing.T) {
	t.Parallel()
	type account struct {
		User     string `json:"user"`
		Password string `json:"password" toolwire:"secret"`
	}
	type in struct {
		Token    string             `json:"token" toolwire:"secret"`
		One      account            `json:"one"`
		List     []account          `json:"list"`
		Accounts map[string]account `json:"accounts"`
	}
	tl, err := tool.New("accounts", func(context.Context, in) (string, error) { return "", nil })
	require.NoError(t, err)
	schema := tl.Spec().GetInputSchemaJson()
	require.Equal(t, 4, strings.Count(schema, `"`+tool.SecretKeyword+`":true`), schema)
}

// The loop guard's marks: `toolwire:"noise"` and `toolwire:"significant"`
// on top-level fields, beside a secret mark.
func TestSignificantAndNoiseFieldsAreMarked(t *testing.T) {
	t.Parallel()
	type in struct {
		Path   string `json:"path" toolwire:"significant"`
		Reason string `json:"reason,omitempty" toolwire:"noise"`
		Token  string `json:"token,omitempty" toolwire:"secret,noise"`
		Plain  int    `json:"plain,omitempty"`
	}
	tl, err := tool.New("marks", func(context.Context, in) (string, error) { return "", nil })
	require.NoError(t, err)
	var schema struct {
		Properties map[string]map[string]any `json:"properties"`
	}
	require.NoError(t, json.Unmarshal([]byte(tl.Spec().GetInputSchemaJson()), &schema))
	require.Equal(t, true, schema.Properties["path"][tool.SignificantKeyword])
	require.Equal(t, false, schema.Properties["reason"][tool.SignificantKeyword])
	require.Equal(t, false, schema.Properties["token"][tool.SignificantKeyword])
	require.Equal(t, true, schema.Properties["token"][tool.SecretKeyword])
	require.NotContains(t, schema.Properties["plain"], tool.SignificantKeyword)
}
