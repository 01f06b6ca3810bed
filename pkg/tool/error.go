package tool

import (
	"context"
	"errors"
	"fmt"
	"time"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Error is a failure with a stable type, the outcome a tool returns when it
// knows what went wrong. Any other error a tool returns is reported as
// PERMANENT with possible side effects, since nothing says otherwise.
//
// Match it with errors.As; the type decides retries, not the message.
type Error struct {
	// Type classifies the failure.
	Type toolwirev1.ErrorType
	// Message is shown to the caller and the model. It must not carry secrets.
	Message string
	// Retryable says a later attempt with the same arguments may succeed.
	Retryable bool
	// SideEffects says what the failed attempt may have changed. Zero means
	// POSSIBLE for errors raised by tools and NONE for errors raised before
	// execution.
	SideEffects toolwirev1.PartialSideEffects
	// Suggestion is a hint for the caller or model.
	Suggestion string
	// RetryAfter is the earliest sensible retry (RATE_LIMIT, OVERLOADED).
	RetryAfter time.Duration
	// Violations lists offending fields of a VALIDATION error.
	Violations []*toolwirev1.FieldViolation
	// Content the failed call still shows the caller (an MCP tool's
	// isError result keeps its blocks); nil for most errors.
	Content []*toolwirev1.Content
	// Structured output of the failed call as JSON, if any.
	Structured []byte
	// Meta is the failed call's own metadata as a JSON object (an MCP
	// tool's isError result `_meta`), if any.
	Meta []byte
	// Cause is the underlying error, if any; it is not sent to callers.
	Cause error
}

// Errorf returns an *Error of type t with a formatted message. A %w verb
// records the wrapped error as Cause.
func Errorf(t toolwirev1.ErrorType, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Type: t, Message: err.Error(), Cause: errors.Unwrap(err), Retryable: DefaultRetryable(t)}
}

// Transient reports a temporary failure that a retry may fix. The tool
// asserts it had no side effects: say otherwise with SideEffects.
func Transient(err error) *Error {
	return &Error{Type: toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, Message: err.Error(), Retryable: true,
		SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, Cause: err}
}

// Permanent reports a failure that will repeat with the same arguments.
func Permanent(err error) *Error {
	return &Error{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, Message: err.Error(), Cause: err}
}

// InvalidArgument reports a VALIDATION failure of one field (a JSON
// Pointer into the arguments, "" for the root).
func InvalidArgument(field, message string) *Error {
	return &Error{
		Type:        toolwirev1.ErrorType_ERROR_TYPE_VALIDATION,
		Message:     fmt.Sprintf("invalid argument %q: %s", field, message),
		SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE,
		Violations:  []*toolwirev1.FieldViolation{{Field: field, Message: message}},
	}
}

// Error implements error.
func (e *Error) Error() string {
	name := e.Type.String()
	if e.Message == "" {
		return name
	}
	return name + ": " + e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// Is reports whether target is an *Error of the same Type, so that
// errors.Is(err, &tool.Error{Type: X}) matches by type.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Type == e.Type
}

// Proto returns the wire form of e.
func (e *Error) Proto() *toolwirev1.ToolError {
	pe := &toolwirev1.ToolError{
		Type:               e.Type,
		Message:            e.Message,
		Retryable:          e.Retryable,
		PartialSideEffects: e.SideEffects,
		Suggestion:         e.Suggestion,
		Violations:         e.Violations,
	}
	if pe.Type == toolwirev1.ErrorType_ERROR_TYPE_UNSPECIFIED {
		pe.Type = toolwirev1.ErrorType_ERROR_TYPE_INTERNAL
	}
	if pe.PartialSideEffects == toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNSPECIFIED {
		pe.PartialSideEffects = toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_POSSIBLE
	}
	if e.RetryAfter > 0 {
		pe.RetryAfter = durationpbNew(e.RetryAfter)
	}
	return pe
}

// AsError converts any error a tool returned into an *Error: an *Error in
// the chain is returned as is; context cancellation and deadlines map to
// CANCELLED and TIMEOUT; anything else is PERMANENT with possible side
// effects.
func AsError(ctx context.Context, err error) *Error {
	if err == nil {
		return nil
	}
	var te *Error
	if errors.As(err, &te) {
		return te
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Type: toolwirev1.ErrorType_ERROR_TYPE_TIMEOUT, Message: "the attempt ran out of time",
			SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN, Retryable: true, Cause: err}
	case errors.Is(err, context.Canceled):
		msg := "the call was cancelled"
		if ctx != nil {
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
				msg = cause.Error()
			}
		}
		return &Error{Type: toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, Message: msg,
			SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN, Cause: err}
	}
	return &Error{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, Message: err.Error(), Cause: err}
}

// DefaultRetryable says whether errors of type t are retryable when
// nothing says otherwise: TRANSIENT, RATE_LIMIT, OVERLOADED and TIMEOUT.
func DefaultRetryable(t toolwirev1.ErrorType) bool {
	switch t {
	case toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, toolwirev1.ErrorType_ERROR_TYPE_RATE_LIMIT,
		toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED, toolwirev1.ErrorType_ERROR_TYPE_TIMEOUT:
		return true
	}
	return false
}
