package builtin_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

// byName returns the built-in tool name.
func byName(t *testing.T, name string) *tool.Tool {
	t.Helper()
	for _, tl := range builtin.Tools() {
		if tl.Name() == name {
			return tl
		}
	}
	t.Fatalf("no built-in tool %q", name)
	return nil
}

// invoke calls tool name with args.
func invoke(t *testing.T, ctx context.Context, name, args string) (*tool.Result, error) {
	t.Helper()
	return byName(t, name).Invoke(ctx, []byte(args))
}

// requireToolError asserts that err is a *tool.Error and returns it.
func requireToolError(t *testing.T, err error) *tool.Error {
	t.Helper()
	var te *tool.Error
	require.ErrorAs(t, err, &te)
	return te
}

func TestSpecs(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		name        string
		required    []any
		annotations *toolwirev1.ToolAnnotations
	}{
		{"echo", []any{"text"}, &toolwirev1.ToolAnnotations{ReadOnly: proto.Bool(true), Idempotent: proto.Bool(true), OpenWorld: proto.Bool(false)}},
		{"sleep", []any{"duration"}, &toolwirev1.ToolAnnotations{ReadOnly: proto.Bool(true), Idempotent: proto.Bool(true), OpenWorld: proto.Bool(false)}},
		{"fail", []any{"type"}, &toolwirev1.ToolAnnotations{Destructive: proto.Bool(false), OpenWorld: proto.Bool(false)}},
		{"remember", []any{"key", "value"}, &toolwirev1.ToolAnnotations{Idempotent: proto.Bool(true), Destructive: proto.Bool(false), OpenWorld: proto.Bool(false)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec := byName(t, tt.name).Spec()
			require.NoError(t, registry.Check(spec), "the registry accepts the spec")
			require.NotEmpty(t, spec.GetTitle())
			require.NotEmpty(t, spec.GetDescription())
			require.NotEmpty(t, spec.GetSummary())
			wantCategory := toolwirev1.ToolCategory_TOOL_CATEGORY_UTILITY
			if tt.name == "remember" {
				wantCategory = toolwirev1.ToolCategory_TOOL_CATEGORY_ACTION // it changes session state, through an intent
			}
			require.Equal(t, wantCategory, spec.GetCategory())
			require.True(t, proto.Equal(tt.annotations, spec.GetAnnotations()), "annotations: %v", spec.GetAnnotations())

			var schema map[string]any
			require.NoError(t, json.Unmarshal([]byte(spec.GetInputSchemaJson()), &schema))
			require.Equal(t, tt.required, schema["required"])
			for name, p := range schema["properties"].(map[string]any) {
				require.NotEmpty(t, p.(map[string]any)["description"], "property %s is described", name)
			}
		})
	}
	require.Len(t, builtin.Tools(), 4)
}

func TestEcho(t *testing.T) {
	t.Parallel()

	for _, text := range []string{"hello", "", "  spaces and\nnewlines\t", `"quoted" {json} <html> & ünïcödé 🎉`} {
		res, err := invoke(t, context.Background(), "echo", mustJSON(t, map[string]string{"text": text}))
		require.NoError(t, err)
		require.Len(t, res.Content, 1)
		require.Equal(t, text, res.Content[0].GetText().GetText(), "the text block is exactly the input")
		require.JSONEq(t, mustJSON(t, map[string]string{"text": text}), string(res.Structured))
		require.Empty(t, res.Intents)
	}
}

func TestEchoOutputSchema(t *testing.T) {
	t.Parallel()

	require.JSONEq(t,
		`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`,
		byName(t, "echo").Spec().GetOutputSchemaJson())
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
