package worker

import (
	"context"

	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/redact"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The values of a call's secret arguments (internal/redact) are removed
// at two layers:
//
//   - redactingExecutor wraps each executor, inside observed.Executor:
//     an attempt's result and error are redacted before anything sees
//     them (spans, RETRYING events, responses, logs);
//   - the sinks redact what they write, whatever built it: finish (the
//     response before it is stored, inline or in the blob store), refuse
//     (before its log line and term reason), deadLetter, publishEvent and
//     attemptEvent (events), callLog (log lines) and run's panic report.
//
// For a tool without secret fields each layer costs one substring search
// of its schema (redact.ForSpec); nothing is parsed.

// redactingExecutor redacts an attempt's result and error by the call's
// secret arguments.
type redactingExecutor struct{ next executors.Executor }

func (x redactingExecutor) Execute(ctx context.Context, req *executors.Request) (*tool.Result, error) {
	res, err := x.next.Execute(ctx, req)
	plan := redact.ForSpec(req.Spec)
	if plan == nil {
		return res, err
	}
	sec := plan.Secrets(req.Call.GetArguments())
	if res != nil && res.Input != nil && err == nil {
		in, ierr := sec.Input(res.Input)
		if ierr != nil {
			return nil, &tool.Error{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, Message: ierr.Error(),
				SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_POSSIBLE}
		}
		c := *res
		c.Input = in
		res = &c
	}
	return sec.Result(res), sec.Err(err)
}

// Close closes the decorated executor (executors.Closer).
func (x redactingExecutor) Close(ctx context.Context) error { return executors.Close(ctx, x.next) }

// Unwrap returns the decorated executor.
func (x redactingExecutor) Unwrap() executors.Executor { return x.next }

// secretsOf returns the secret values of call's arguments by the schema
// of the spec this worker serves for it (nil when there are none, or the
// call is of a tool or version this worker does not serve: then nothing
// it says quotes the arguments).
func (w *Worker) secretsOf(call *toolwirev1.ToolCall) *redact.Secrets {
	if call == nil {
		return nil
	}
	ent := (*w.specs.Load())[call.Tool]
	if ent == nil || (call.SpecVersion != "" && call.SpecVersion != ent.Spec.Version) {
		return nil
	}
	plan := redact.ForSpec(ent.Spec)
	if plan == nil {
		return nil
	}
	return plan.Secrets(call.Arguments)
}

// redactEvent redacts the text of an event of call.
func (w *Worker) redactEvent(call *toolwirev1.ToolCall, ev *toolwirev1.CallEvent) {
	if ev.Message != "" || ev.Error != nil || len(ev.Partial) > 0 || ev.Response != nil {
		w.secretsOf(call).Event(ev)
	}
}

// redactArgs returns log arguments with the strings and errors among them
// redacted.
func redactArgs(sec *redact.Secrets, args []any) []any {
	if sec == nil {
		return args
	}
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			a = sec.String(v)
		case error:
			a = sec.Err(v).Error()
		}
		out[i] = a
	}
	return out
}
