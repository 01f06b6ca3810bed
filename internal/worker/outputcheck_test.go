package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/sandbox"
	"github.com/toolwire/toolwire/internal/worker"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// printsJSON is a sandbox tool that prints out (its braces doubled, as
// the sandbox's argv templates want literal braces) as its JSON output,
// with output schema schema.
func printsJSON(name, out, schema string, advisory bool) *toolwirev1.ToolSpec {
	return &toolwirev1.ToolSpec{Name: name, Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX, Provider: "local",
		Config:          &toolwirev1.ToolSpec_Sandbox{Sandbox: &toolwirev1.SandboxConfig{Argv: []string{"/bin/echo", out}, JsonOutput: true}},
		InputSchemaJson: `{"type":"object"}`, OutputSchemaJson: schema, OutputSchemaAdvisory: advisory}
}

// A sandbox tool's structured output is checked against its output
// schema: one that prints {"x":"not-an-integer"} against {x: integer} is
// answered PERMANENT naming /x (before, ok: true); with
// output_schema_advisory the result passes as it is; a matching output
// passes.
func TestStructuredOutputIsCheckedAgainstTheOutputSchema(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	sb, err := sandbox.New(sandbox.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { // after the worker's Stop: it kills and reaps the helpers its pool parked
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, sb.Close(ctx))
	})
	const schema = `{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}`
	specs := []*toolwirev1.ToolSpec{
		printsJSON("out_bad", `{{"x":"not-an-integer"}}`, schema, false),
		printsJSON("out_advisory", `{{"x":"not-an-integer"}}`, schema, true),
		printsJSON("out_good", `{{"x":7}}`, schema, false),
		printsJSON("out_many", `{{"x":1,"items":["a","b","c","d","e","f","g","h","i","j","k","l"]}}`,
			`{"type":"object","properties":{"x":{"type":"integer"},"items":{"type":"array","items":{"type":"integer"}}}}`, false),
	}
	w, err := worker.New(s.Env.Open(t, "outcheck"), worker.Config{
		Pools:     []worker.Pool{{Concurrency: 2, PoolConfig: bus.PoolConfig{Name: "sandbox", Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX}}},
		Executors: map[toolwirev1.ExecutorType]executors.Executor{toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX: sb},
		Specs:     specs,
	})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	for _, sp := range specs {
		s.WaitTool(t, sp.Name)
	}
	call := func(name string) *toolwirev1.ToolResponse {
		r, err := s.Dispatcher.Call(t.Context(), dispatchIdentity, &toolwirev1.CallRequest{Tool: name, ArgumentsJson: `{}`}, time.Minute)
		require.NoError(t, err)
		require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.State, name)
		return r.Response
	}

	bad := call("out_bad")
	require.False(t, bad.Ok, "an output that breaks the schema is not an answer")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, bad.GetError().GetType())
	require.Contains(t, bad.GetError().GetMessage(), "/x: ")
	require.Contains(t, bad.GetError().GetMessage(), "output_schema")
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_POSSIBLE, bad.GetError().GetPartialSideEffects(), "the tool ran")
	require.Len(t, bad.GetError().GetViolations(), 1)
	require.Equal(t, "/x", bad.GetError().GetViolations()[0].GetField())
	require.Empty(t, bad.GetStructuredJson())

	adv := call("out_advisory")
	require.True(t, adv.Ok, "advisory: passed as it is")
	require.JSONEq(t, `{"x":"not-an-integer"}`, adv.GetStructuredJson())

	// Twelve bad items: five named and carried, the rest counted, so that
	// an output of many bad items cannot make an error too large to
	// publish.
	many := call("out_many")
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, many.GetError().GetType())
	require.Len(t, many.GetError().GetViolations(), 5)
	require.Contains(t, many.GetError().GetMessage(), "(and 7 more)")

	good := call("out_good")
	require.True(t, good.Ok)
	require.JSONEq(t, `{"x":7}`, good.GetStructuredJson())
}
