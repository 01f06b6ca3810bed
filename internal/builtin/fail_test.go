package builtin_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/native"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func TestFail(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		args string
		want *tool.Error
	}{
		{
			args: `{"type":"TRANSIENT"}`,
			want: &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, Message: "failure requested from the fail tool", Retryable: true},
		},
		{
			args: `{"type":"error_type_permanent","message":"no such row"}`,
			want: &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, Message: "no such row"},
		},
		{
			args: `{"type":" Rate_Limit ","retry_after":"2s","side_effects":"none"}`,
			want: &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT, Message: "failure requested from the fail tool",
				Retryable: true, RetryAfter: 2 * time.Second, SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE},
		},
		{
			args: `{"type":"TRANSIENT","retryable":false,"side_effects":"Unknown"}`,
			want: &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, Message: "failure requested from the fail tool",
				SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN},
		},
		{
			args: `{"type":"PERMANENT","retryable":true,"side_effects":"PARTIAL_SIDE_EFFECTS_POSSIBLE"}`,
			want: &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, Message: "failure requested from the fail tool",
				Retryable: true, SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_POSSIBLE},
		},
		{
			args: `{"type":"unknown_outcome","message":"m"}`,
			want: &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_UNKNOWN_OUTCOME, Message: "m"},
		},
	} {
		t.Run(tt.args, func(t *testing.T) {
			t.Parallel()
			res, err := invoke(t, context.Background(), "fail", tt.args)
			require.Nil(t, res)
			require.Equal(t, tt.want, requireToolError(t, err))
		})
	}
}

func TestFailEveryErrorType(t *testing.T) {
	t.Parallel()

	for v, name := range toolwirev1.ErrorType_name {
		if v == int32(toolwirev1.ErrorType_ERROR_TYPE_UNSPECIFIED) {
			continue
		}
		_, err := invoke(t, context.Background(), "fail", `{"type":"`+name+`"}`)
		require.Equal(t, toolwirev1.ErrorType(v), requireToolError(t, err).Type, name)
	}
}

func TestFailValidation(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		args      string
		wantField string
	}{
		{`{"type":"BOGUS"}`, "/type"},
		{`{"type":""}`, "/type"},
		{`{}`, "/type"},
		{`{"type":"UNSPECIFIED"}`, "/type"},
		{`{"type":"ERROR_TYPE_UNSPECIFIED"}`, "/type"},
		{`{"type":"TRANSIENT","side_effects":"some"}`, "/side_effects"},
		{`{"type":"TRANSIENT","side_effects":"unspecified"}`, "/side_effects"},
		{`{"type":"RATE_LIMIT","retry_after":"later"}`, "/retry_after"},
		{`{"type":"RATE_LIMIT","retry_after":"-1s"}`, "/retry_after"},
		{`{"type":"TRANSIENT","retryable":"yes"}`, "/retryable"},
	} {
		t.Run(tt.args, func(t *testing.T) {
			t.Parallel()
			_, err := invoke(t, context.Background(), "fail", tt.args)
			te := requireToolError(t, err)
			require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, te.Type)
			require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, te.SideEffects)
			require.False(t, te.Retryable)
			require.Equal(t, tt.wantField, te.Violations[0].GetField())
		})
	}
}

func TestFailPanics(t *testing.T) {
	t.Parallel()

	require.PanicsWithValue(t, "fail: panic requested", func() {
		_, _ = invoke(t, context.Background(), "fail", `{"type":"panic"}`)
	})

	// Served by the native executor, the panic is an INTERNAL error.
	exec, err := native.NewWithConfig(native.Config{Logger: slog.New(slog.DiscardHandler)}, builtin.Tools()...)
	require.NoError(t, err)
	_, err = exec.Execute(context.Background(), &executors.Request{
		Call: &toolwirev1.ToolCall{Tool: "fail", Arguments: []byte(`{"type":"PANIC","message":"on purpose"}`)},
		Spec: byName(t, "fail").Spec(),
	})
	te := requireToolError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, te.Type)
	require.Equal(t, "tool panicked: fail: on purpose", te.Message)
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN, te.SideEffects)
}
