package tool

import (
	"context"
	"fmt"
	"regexp"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Provider is the provider token of native tools.
const Provider = "builtin"

// nameRE is the providers' function-name rule that every tool name obeys.
var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Tool is a native tool: a typed Go function with the spec derived from its
// types. Create one with New. A Tool is immutable and safe for concurrent
// use.
type Tool struct {
	spec   *toolwirev1.ToolSpec
	invoke func(ctx context.Context, args []byte) (*Result, error)
}

// New defines the native tool name from fn.
//
// The input JSON Schema (draft 2020-12) is derived from In: structs become
// objects whose fields are required unless tagged omitempty or omitzero,
// and a field's `jsonschema:"..."` tag is its description. In must decode
// from a JSON object: a struct, a map with string keys, a pointer to
// either, or json.RawMessage, which accepts any object and receives the
// exact argument bytes. When Out is a struct (or a pointer to one) the
// output schema is derived from it too. See Invoke for how Out becomes a
// Result.
//
// The spec is built from opts; the name, executor (NATIVE), provider
// ("builtin"), native function name and schemas are always New's own.
//
// New returns an error if name does not match ^[a-zA-Z0-9_-]{1,64}$, fn is
// nil, a schema cannot be derived (channels, functions, cycles, maps with
// non-string keys, an In that is not an object) or an option sets a
// negative timeout, retry or limit value.
func New[In, Out any](name string, fn func(ctx context.Context, in In) (Out, error), opts ...Option) (*Tool, error) {
	if !nameRE.MatchString(name) {
		return nil, fmt.Errorf("tool: invalid name %q: must match %s", name, nameRE)
	}
	if fn == nil {
		return nil, fmt.Errorf("tool %s: nil function", name)
	}
	in, err := inputSchema[In]()
	if err != nil {
		return nil, fmt.Errorf("tool %s: %w", name, err)
	}
	out, err := outputSchema[Out]()
	if err != nil {
		return nil, fmt.Errorf("tool %s: %w", name, err)
	}
	spec := &toolwirev1.ToolSpec{}
	for _, opt := range opts {
		opt(spec)
	}
	spec.Name = name
	spec.Executor = toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	spec.Config = &toolwirev1.ToolSpec_Native{Native: &toolwirev1.NativeConfig{Function: name}}
	spec.Provider = Provider
	spec.InputSchemaJson = string(in)
	spec.OutputSchemaJson = string(out)
	spec.Version = ""
	if err := validateOptions(spec); err != nil {
		return nil, fmt.Errorf("tool %s: %w", name, err)
	}
	return &Tool{spec: spec, invoke: invoker(fn)}, nil
}

// Must returns t, or panics if err is not nil. It is meant for tools
// declared at package level: tool.Must(tool.New(...)).
func Must(t *Tool, err error) *Tool {
	if err != nil {
		panic(err)
	}
	return t
}

// Name returns the tool's name.
func (t *Tool) Name() string { return t.spec.GetName() }

// Spec returns a copy of the tool's spec. Its version is empty: the
// registry computes the content hash.
func (t *Tool) Spec() *toolwirev1.ToolSpec { return proto.CloneOf(t.spec) }

// Invoke runs the tool once with the JSON arguments args.
//
// Arguments are decoded with encoding/json into the input type; empty args
// decode as {}. They are not validated against the input schema here: the
// dispatcher does that before a call is queued. A decode failure returns a
// VALIDATION *Error with no side effects whose violation names the field
// (a JSON Pointer) when the decoder says which, and the function is not
// called.
//
// The function's output becomes the Result as follows: a *Result or Result
// is used as is; an output implementing ContentProvider gives the content
// and its JSON the structured output; a string is one text block with no
// structured output; a nil pointer is an empty Result; anything else is
// encoded as JSON into the structured output and one text block holding the
// same JSON. Intents emitted with EmitIntent are appended to the Result's.
// An output that cannot be encoded is an INTERNAL *Error.
//
// Errors returned by the function are returned unchanged; callers map them
// with AsError. Invoke does not recover panics of the function: executors
// do.
func (t *Tool) Invoke(ctx context.Context, args []byte) (*Result, error) {
	return t.invoke(ctx, args)
}

func invoker[In, Out any](fn func(context.Context, In) (Out, error)) func(context.Context, []byte) (*Result, error) {
	return func(ctx context.Context, args []byte) (*Result, error) {
		var in In
		if err := decodeArgs(args, &in); err != nil {
			return nil, err
		}
		ctx, intents := withIntentCollector(ctx)
		defer intents.finish() // also when fn panics
		out, err := fn(ctx, in)
		emitted := intents.finish()
		if err != nil {
			return nil, err
		}
		res, err := toResult(out)
		if err != nil {
			return nil, err
		}
		res.Intents = append(res.Intents, emitted...)
		return res, nil
	}
}

func validateOptions(s *toolwirev1.ToolSpec) error {
	for _, d := range []struct {
		field string
		d     *durationpb.Duration
	}{
		{"timeouts.schedule_to_start", s.GetTimeouts().GetScheduleToStart()},
		{"timeouts.start_to_close", s.GetTimeouts().GetStartToClose()},
		{"timeouts.schedule_to_close", s.GetTimeouts().GetScheduleToClose()},
		{"timeouts.heartbeat", s.GetTimeouts().GetHeartbeat()},
		{"timeouts.latency_budget", s.GetTimeouts().GetLatencyBudget()},
		{"retry.initial_interval", s.GetRetry().GetInitialInterval()},
		{"retry.max_interval", s.GetRetry().GetMaxInterval()},
	} {
		if d.d.AsDuration() < 0 {
			return fmt.Errorf("%s is negative (%s); use 0 to inherit the default", d.field, d.d.AsDuration())
		}
	}
	if r := s.GetRetry(); r != nil {
		switch {
		case r.GetMaxAttempts() < 0:
			return fmt.Errorf("retry.max_attempts is negative (%d); use 0 to inherit the default, 1 to never retry", r.GetMaxAttempts())
		case r.GetMultiplier() < 0:
			return fmt.Errorf("retry.multiplier is negative (%g)", r.GetMultiplier())
		case r.GetJitter() < 0 || r.GetJitter() > 1:
			return fmt.Errorf("retry.jitter %g is outside [0, 1]", r.GetJitter())
		}
	}
	for _, l := range []struct {
		field string
		v     int64
	}{
		{"limits.max_args_bytes", s.GetLimits().GetMaxArgsBytes()},
		{"limits.max_args_depth", int64(s.GetLimits().GetMaxArgsDepth())},
		{"limits.max_output_bytes", s.GetLimits().GetMaxOutputBytes()},
		{"limits.max_output_lines", int64(s.GetLimits().GetMaxOutputLines())},
	} {
		if l.v < 0 {
			return fmt.Errorf("%s is negative (%d); use 0 to inherit the default", l.field, l.v)
		}
	}
	for _, scope := range s.GetScopes() {
		if scope == "" {
			return fmt.Errorf("scopes has an empty scope")
		}
	}
	for _, typ := range s.GetIntents() {
		if typ == "" {
			return fmt.Errorf("intents has an empty type")
		}
	}
	return nil
}
