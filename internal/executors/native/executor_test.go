package native_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"

	"github.com/toolwire/toolwire/internal/logtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"

	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/native"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

type echoIn struct {
	Text string `json:"text"`
}

var errBoom = errors.New("boom")

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer = logtest.Buffer

type bundle struct {
	exec *native.Executor
	logs *syncBuffer
}

func setup(t *testing.T) *bundle {
	t.Helper()
	logs := &syncBuffer{}
	exec, err := native.NewWithConfig(native.Config{Logger: slog.New(slog.NewJSONHandler(logs, nil))},
		tool.Must(tool.New("echo", func(_ context.Context, in echoIn) (string, error) { return in.Text, nil })),
		tool.Must(tool.New("raw", func(_ context.Context, in json.RawMessage) (string, error) { return string(in), nil })),
		tool.Must(tool.New("fails", func(context.Context, echoIn) (string, error) { return "", errBoom })),
		tool.Must(tool.New("panics", func(_ context.Context, in echoIn) (string, error) { panic(in.Text) })),
		tool.Must(tool.New("panics_error", func(context.Context, echoIn) (string, error) { panic(errBoom) })),
	)
	require.NoError(t, err)
	return &bundle{exec: exec, logs: logs}
}

// request is a call of the tool name, with a spec as the registry would
// hold it.
func request(name, args string) *executors.Request {
	return &executors.Request{
		Call: &toolwirev1.ToolCall{CallId: "01CALL", Tool: name, Arguments: []byte(args), Attempt: 1},
		Spec: &toolwirev1.ToolSpec{Name: name, Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE,
			Config: &toolwirev1.ToolSpec_Native{Native: &toolwirev1.NativeConfig{Function: name}}},
	}
}

func TestNew(t *testing.T) {
	t.Parallel()

	echo := tool.Must(tool.New("echo", func(_ context.Context, in echoIn) (string, error) { return in.Text, nil }))
	other := tool.Must(tool.New("echo", func(context.Context, echoIn) (string, error) { return "", nil }))

	_, err := native.New(echo, other)
	require.ErrorContains(t, err, `duplicate tool "echo"`)

	_, err = native.New(echo, nil)
	require.ErrorContains(t, err, "nil tool")

	exec, err := native.New()
	require.NoError(t, err)
	require.Empty(t, exec.Specs())
	require.NoError(t, exec.Add(echo))
	require.ErrorContains(t, exec.Add(other), "duplicate")
	require.Len(t, exec.Specs(), 1)
}

func TestSpecs(t *testing.T) {
	t.Parallel()

	b := setup(t)
	specs := b.exec.Specs()
	var names []string
	for _, s := range specs {
		names = append(names, s.GetName())
		require.Equal(t, toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, s.GetExecutor())
	}
	require.Equal(t, []string{"echo", "fails", "panics", "panics_error", "raw"}, names, "sorted by name")

	specs[0].Name = "changed"
	require.Equal(t, "echo", b.exec.Specs()[0].GetName(), "Specs returns copies")
}

func TestExecuteLooksUpTheTool(t *testing.T) {
	t.Parallel()

	b := setup(t)
	for _, tt := range []struct {
		name string
		req  *executors.Request
	}{
		{"by native function", &executors.Request{
			Call: &toolwirev1.ToolCall{Tool: "alias", Arguments: []byte(`{"text":"hi"}`)},
			Spec: &toolwirev1.ToolSpec{Name: "alias", Config: &toolwirev1.ToolSpec_Native{Native: &toolwirev1.NativeConfig{Function: "echo"}}},
		}},
		{"by spec name when no function is named", &executors.Request{
			Call: &toolwirev1.ToolCall{Tool: "other", Arguments: []byte(`{"text":"hi"}`)},
			Spec: &toolwirev1.ToolSpec{Name: "echo", Config: &toolwirev1.ToolSpec_Native{Native: &toolwirev1.NativeConfig{}}},
		}},
		{"by call tool without a spec", &executors.Request{
			Call: &toolwirev1.ToolCall{Tool: "echo", Arguments: []byte(`{"text":"hi"}`)},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := b.exec.Execute(context.Background(), tt.req)
			require.NoError(t, err)
			require.Equal(t, "hi", res.Content[0].GetText().GetText())
		})
	}
}

func TestExecuteErrors(t *testing.T) {
	t.Parallel()

	b := setup(t)
	for _, tt := range []struct {
		name            string
		req             *executors.Request
		wantType        toolwirev1.ErrorType
		wantMessage     string
		wantSideEffects toolwirev1.PartialSideEffects
	}{
		{
			name:            "unknown tool",
			req:             request("nope", `{}`),
			wantType:        toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND,
			wantMessage:     `no native tool "nope" in this worker`,
			wantSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE,
		},
		{
			name:            "panic with a string",
			req:             request("panics", `{"text":"kaboom"}`),
			wantType:        toolwirev1.ErrorType_ERROR_TYPE_INTERNAL,
			wantMessage:     "tool panicked: kaboom",
			wantSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN,
		},
		{
			name:            "panic with an error",
			req:             request("panics_error", `{}`),
			wantType:        toolwirev1.ErrorType_ERROR_TYPE_INTERNAL,
			wantMessage:     "tool panicked: boom",
			wantSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN,
		},
		{
			name:            "undecodable arguments",
			req:             request("echo", `{"text":1}`),
			wantType:        toolwirev1.ErrorType_ERROR_TYPE_VALIDATION,
			wantMessage:     `invalid argument "/text": want string, got number`,
			wantSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := b.exec.Execute(context.Background(), tt.req)
			require.Nil(t, res)
			var te *tool.Error
			require.ErrorAs(t, err, &te)
			require.Equal(t, tt.wantType, te.Type)
			require.Equal(t, tt.wantMessage, te.Message)
			require.Equal(t, tt.wantSideEffects, te.SideEffects)
			require.False(t, te.Retryable)
		})
	}
}

func TestExecuteLogsPanics(t *testing.T) {
	t.Parallel()

	b := setup(t)
	_, err := b.exec.Execute(context.Background(), request("panics", `{"text":"kaboom"}`))
	require.Error(t, err)

	var rec map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.logs.String()), &rec))
	require.Equal(t, "ERROR", rec["level"])
	require.Equal(t, "native tool panicked", rec["msg"])
	require.Equal(t, "panics", rec["tool"])
	require.Equal(t, "01CALL", rec["call_id"])
	require.Equal(t, "kaboom", rec["panic"])
	require.Contains(t, rec["stack"], "native_test.setup", "the stack shows where the tool panicked")
}

// TestPanicsShowNoSecret: a panic that quotes a secret argument shows
// "[REDACTED]" in the log line and the error.
func TestPanicsShowNoSecret(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := request("panics", `{"text":"panic-secret-3e81"}`)
	req.Spec.InputSchemaJson = `{"type":"object","properties":{"text":{"type":"string","x-toolwire-secret":true}}}`
	_, err := b.exec.Execute(context.Background(), req)
	require.ErrorContains(t, err, "tool panicked: [REDACTED]")
	require.Contains(t, b.logs.String(), `"panic":"[REDACTED]"`)
	require.NotContains(t, b.logs.String(), "panic-secret")
}

func TestExecutePassesThrough(t *testing.T) {
	t.Parallel()

	b := setup(t)

	args := `{"n": 12345678901234567890, "s":"\u00e9" }`
	res, err := b.exec.Execute(context.Background(), request("raw", args))
	require.NoError(t, err)
	require.Equal(t, args, res.Content[0].GetText().GetText(), "the exact argument bytes reach the tool")

	_, err = b.exec.Execute(context.Background(), request("fails", `{}`))
	require.Same(t, errBoom, err, "tool errors are returned unchanged")
}

func TestExecuteWhileAdding(t *testing.T) {
	t.Parallel()

	b := setup(t)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			name := "t" + strconv.Itoa(i)
			assert.NoError(t, b.exec.Add(tool.Must(tool.New(name, func(context.Context, echoIn) (string, error) { return name, nil }))))
			res, err := b.exec.Execute(context.Background(), request(name, `{}`))
			if assert.NoError(t, err) {
				assert.Equal(t, name, res.Content[0].GetText().GetText())
			}
		})
		wg.Go(func() {
			_, err := b.exec.Execute(context.Background(), request("echo", fmt.Sprintf(`{"text":"%d"}`, i)))
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	require.Len(t, b.exec.Specs(), 25)
}
