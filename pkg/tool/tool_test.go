package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

type searchIn struct {
	Query string   `json:"query" jsonschema:"what to look for"`
	Limit int      `json:"limit,omitempty" jsonschema:"most results to return"`
	Tags  []string `json:"tags,omitzero"`
	Exact bool     `json:"exact"`
	Score *float64 `json:"score,omitempty"`
}

type searchOut struct {
	Hits []string `json:"hits"`
}

func search(_ context.Context, in searchIn) (searchOut, error) {
	return searchOut{Hits: []string{in.Query}}, nil
}

// schemaOf decodes a JSON Schema for assertions.
func schemaOf(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m), "schema: %s", s)
	return m
}

func TestNewValidatesName(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"search", true},
		{"Search_v2-beta", true},
		{strings.Repeat("a", 64), true},
		{"", false},
		{strings.Repeat("a", 65), false},
		{"has space", false},
		{"dotted.name", false},
		{"mcp/slash", false},
		{"ünïcode", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tl, err := tool.New(tt.name, search)
			if tt.ok {
				require.NoError(t, err)
				require.Equal(t, tt.name, tl.Name())
				return
			}
			require.ErrorContains(t, err, "invalid name")
		})
	}
}

func TestNewRejectsTypesWithoutSchema(t *testing.T) {
	t.Parallel()

	type withChan struct {
		C chan int `json:"c"`
	}
	type cyclic struct {
		Next *cyclic `json:"next"`
	}
	for name, newTool := range map[string]func() (*tool.Tool, error){
		"input is a string": func() (*tool.Tool, error) {
			return tool.New("t", func(context.Context, string) (string, error) { return "", nil })
		},
		"input is a slice": func() (*tool.Tool, error) {
			return tool.New("t", func(context.Context, []int) (string, error) { return "", nil })
		},
		"input has a channel": func() (*tool.Tool, error) {
			return tool.New("t", func(context.Context, withChan) (string, error) { return "", nil })
		},
		"input is cyclic": func() (*tool.Tool, error) {
			return tool.New("t", func(context.Context, cyclic) (string, error) { return "", nil })
		},
		"output has a channel": func() (*tool.Tool, error) {
			return tool.New("t", func(context.Context, searchIn) (withChan, error) { return withChan{}, nil })
		},
		"nil function": func() (*tool.Tool, error) {
			return tool.New[searchIn, searchOut]("t", nil)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tl, err := newTool()
			require.Error(t, err)
			require.Nil(t, tl)
		})
	}
}

func TestNewValidatesOptions(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		name    string
		opt     tool.Option
		wantErr string
	}{
		{"negative timeout", tool.WithTimeouts(0, -time.Second, 0, 0), "timeouts.start_to_close is negative"},
		{"negative attempts", tool.WithRetryPolicy(&toolwirev1.RetryPolicy{MaxAttempts: -1}), "retry.max_attempts"},
		{"negative interval", tool.WithRetryPolicy(&toolwirev1.RetryPolicy{InitialInterval: durationpb.New(-time.Second)}), "retry.initial_interval"},
		{"jitter above one", tool.WithRetryPolicy(&toolwirev1.RetryPolicy{Jitter: 1.5}), "retry.jitter"},
		{"negative limit", tool.WithLimits(&toolwirev1.Limits{MaxOutputLines: -1}), "limits.max_output_lines"},
		{"empty scope", tool.WithScopes("read", ""), "empty scope"},
		{"empty intent", tool.WithIntents(""), "empty type"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tool.New("search", search, tt.opt)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestSpec(t *testing.T) {
	t.Parallel()

	retry := &toolwirev1.RetryPolicy{MaxAttempts: 3, Jitter: 0.2}
	tl, err := tool.New("search", search,
		tool.WithTitle("Search"),
		tool.WithDescription("Searches the index."),
		tool.WithSummary("Search the index.\nReturns matching ids."),
		tool.WithDoc("Long documentation."),
		tool.WithCategory(toolwirev1.ToolCategory_TOOL_CATEGORY_RETRIEVAL),
		tool.ReadOnly(),
		tool.Idempotent(),
		tool.Destructive(false),
		tool.OpenWorld(false),
		tool.WithTimeouts(time.Minute, 10*time.Second, 0, 2*time.Second),
		tool.WithRetryPolicy(retry),
		tool.WithScopes("index:read"),
		tool.WithIntents("SET_STATE", "acme.reindex"),
		tool.WithLimits(&toolwirev1.Limits{MaxOutputBytes: 1 << 10}),
		tool.RequiresApproval(),
	)
	require.NoError(t, err)
	retry.MaxAttempts = 9 // New keeps its own copy

	spec := tl.Spec()
	require.Equal(t, "search", spec.GetName())
	require.Equal(t, "Search", spec.GetTitle())
	require.Equal(t, "Searches the index.", spec.GetDescription())
	require.Equal(t, "Search the index.\nReturns matching ids.", spec.GetSummary())
	require.Equal(t, "Long documentation.", spec.GetDoc())
	require.Equal(t, toolwirev1.ToolCategory_TOOL_CATEGORY_RETRIEVAL, spec.GetCategory())
	require.Equal(t, toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, spec.GetExecutor())
	require.Equal(t, "search", spec.GetNative().GetFunction())
	require.Equal(t, "builtin", spec.GetProvider())
	require.Empty(t, spec.GetVersion(), "the registry computes the version")
	require.True(t, proto.Equal(&toolwirev1.ToolAnnotations{
		ReadOnly: proto.Bool(true), Idempotent: proto.Bool(true), Destructive: proto.Bool(false), OpenWorld: proto.Bool(false),
	}, spec.GetAnnotations()))
	require.True(t, proto.Equal(&toolwirev1.Timeouts{
		ScheduleToStart: durationpb.New(time.Minute), StartToClose: durationpb.New(10 * time.Second),
		Heartbeat: durationpb.New(2 * time.Second),
	}, spec.GetTimeouts()), "zero timeouts stay unset")
	require.EqualValues(t, 3, spec.GetRetry().GetMaxAttempts())
	require.Equal(t, []string{"index:read"}, spec.GetScopes())
	require.Equal(t, []string{"SET_STATE", "acme.reindex"}, spec.GetIntents())
	require.EqualValues(t, 1<<10, spec.GetLimits().GetMaxOutputBytes())
	require.True(t, spec.GetRequiresApproval())
	require.NotEmpty(t, spec.GetInputSchemaJson())
	require.NotEmpty(t, spec.GetOutputSchemaJson())

	spec.Name = "changed"
	spec.Annotations.ReadOnly = proto.Bool(false)
	require.Equal(t, "search", tl.Spec().GetName(), "Spec returns a copy")
	require.True(t, tl.Spec().GetAnnotations().GetReadOnly())
}

func TestSpecWithoutOptions(t *testing.T) {
	t.Parallel()

	tl, err := tool.New("search", search)
	require.NoError(t, err)
	spec := tl.Spec()
	require.Nil(t, spec.GetAnnotations(), "unset annotations keep MCP's defaults")
	require.Nil(t, spec.GetTimeouts())
	require.Nil(t, spec.GetRetry())
	require.False(t, spec.GetRequiresApproval())
}

func TestOptionsCannotOverrideDerivedFields(t *testing.T) {
	t.Parallel()

	hijack := tool.Option(func(s *toolwirev1.ToolSpec) {
		s.Name = "other"
		s.Executor = toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX
		s.InputSchemaJson = "{}"
		s.Version = "sha256:x"
	})
	tl, err := tool.New("search", search, hijack)
	require.NoError(t, err)
	spec := tl.Spec()
	require.Equal(t, "search", spec.GetName())
	require.Equal(t, toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, spec.GetExecutor())
	require.NotEqual(t, "{}", spec.GetInputSchemaJson())
	require.Empty(t, spec.GetVersion())
}

func TestMust(t *testing.T) {
	t.Parallel()

	require.Equal(t, "search", tool.Must(tool.New("search", search)).Name())
	require.Panics(t, func() { tool.Must(tool.New("bad name", search)) })
}

func TestInvokeReturnsToolErrorsUnchanged(t *testing.T) {
	t.Parallel()

	want := tool.Errorf(toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT, "slow down")
	plain := errors.New("boom")
	for name, wantErr := range map[string]error{"tool error": want, "plain error": plain} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tl, err := tool.New("t", func(context.Context, searchIn) (searchOut, error) {
				return searchOut{Hits: []string{"ignored"}}, wantErr
			})
			require.NoError(t, err)
			res, err := tl.Invoke(context.Background(), []byte(`{"query":"q","exact":true}`))
			require.Nil(t, res)
			require.Same(t, wantErr, err)
		})
	}
}

func TestInvokeDoesNotRecoverPanics(t *testing.T) {
	t.Parallel()

	tl, err := tool.New("t", func(context.Context, searchIn) (searchOut, error) { panic("boom") })
	require.NoError(t, err)
	require.PanicsWithValue(t, "boom", func() {
		_, _ = tl.Invoke(context.Background(), []byte(`{}`))
	})
}

func TestInvokePassesContext(t *testing.T) {
	t.Parallel()

	type key struct{}
	tl, err := tool.New("t", func(ctx context.Context, _ searchIn) (string, error) {
		info, _ := tool.CallInfoFrom(ctx)
		return ctx.Value(key{}).(string) + " " + info.CallID, nil
	})
	require.NoError(t, err)
	ctx := tool.WithCallInfo(context.WithValue(context.Background(), key{}, "value"), tool.CallInfo{CallID: "01CALL"})
	res, err := tl.Invoke(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, "value 01CALL", res.Content[0].GetText().GetText())
}
