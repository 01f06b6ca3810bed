package client

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ToolError is a tool call's failure as the call's terminal response
// reports it: refused at admission (VALIDATION, NOT_FOUND,
// PERMISSION_DENIED, ...) or failed in a worker (TIMEOUT, TRANSIENT,
// MAX_ATTEMPTS, ...). Result.Err returns one; it is an answer of the
// fabric, not a failure of the request (see the package doc).
//
// Match a type with errors.Is and a target of that type, or with
// ErrorTypeOf:
//
//	if errors.Is(res.Err(), &client.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND}) { ... }
type ToolError struct {
	// CallID is the call's id (set for refused calls too, for the record).
	CallID string
	// Tool is the tool's name.
	Tool string
	// Type classifies the failure.
	Type toolwirev1.ErrorType
	// Message says what went wrong; for VALIDATION it names the field.
	Message string
	// Retryable is true when the same call may succeed later. Errors
	// raised before execution are never retryable.
	Retryable bool
	// SideEffects says what the failed call may have changed; NONE for
	// errors raised before execution.
	SideEffects toolwirev1.PartialSideEffects
	// Suggestion is what the caller or the model could do instead.
	Suggestion string
	// RetryAfter is the earliest sensible retry (RATE_LIMIT, OVERLOADED);
	// 0 when not given.
	RetryAfter time.Duration
	// Violations are the offending fields of a VALIDATION error.
	Violations []*toolwirev1.FieldViolation
	// Approval is, for CONFIRMATION_REQUIRED, the approval the call waits
	// for (or nil, when an approval token it presented was refused).
	Approval *toolwirev1.ApprovalRequired
}

// Error returns "toolwire: TOOL: TYPE: message".
func (e *ToolError) Error() string {
	var b strings.Builder
	b.WriteString("toolwire: ")
	if e.Tool != "" {
		b.WriteString(e.Tool)
		b.WriteString(": ")
	}
	b.WriteString(TypeName(e.Type))
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Is reports whether target is a *ToolError of the same Type. A target
// whose Type is ERROR_TYPE_UNSPECIFIED matches every *ToolError.
func (e *ToolError) Is(target error) bool {
	t, ok := target.(*ToolError)
	return ok && (t.Type == toolwirev1.ErrorType_ERROR_TYPE_UNSPECIFIED || t.Type == e.Type)
}

// ErrorTypeOf returns the Type of the first *ToolError in err's chain, or
// ERROR_TYPE_UNSPECIFIED when there is none (nil, a transport error).
func ErrorTypeOf(err error) toolwirev1.ErrorType {
	var te *ToolError
	if errors.As(err, &te) {
		return te.Type
	}
	return toolwirev1.ErrorType_ERROR_TYPE_UNSPECIFIED
}

// TypeName returns the short name of an error type, e.g. "VALIDATION" for
// ERROR_TYPE_VALIDATION.
func TypeName(t toolwirev1.ErrorType) string {
	return strings.TrimPrefix(t.String(), "ERROR_TYPE_")
}

func toolError(resp *toolwirev1.ToolResponse) *ToolError {
	pe := resp.GetError()
	if pe == nil {
		return &ToolError{CallID: resp.GetCallId(), Tool: resp.GetTool(), Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL,
			Message:     "the response is not ok but carries no error",
			SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN}
	}
	return &ToolError{
		CallID: resp.GetCallId(), Tool: resp.GetTool(),
		Type: pe.GetType(), Message: pe.GetMessage(), Retryable: pe.GetRetryable(),
		SideEffects: pe.GetPartialSideEffects(), Suggestion: pe.GetSuggestion(),
		RetryAfter: pe.GetRetryAfter().AsDuration(), Violations: pe.GetViolations(), Approval: pe.GetApproval(),
	}
}

// ErrPending is matched (errors.Is) by the *StateError of a call that is
// accepted but has no terminal response yet. The call keeps running;
// fetch its result later with GetResult.
var ErrPending = errors.New("toolwire: call pending")

// ErrUnknownCall is matched (errors.Is) by the *StateError of a call id
// the dispatcher does not know in the caller's tenant (never submitted,
// malformed, or past the retention of the results).
var ErrUnknownCall = errors.New("toolwire: unknown call")

// ErrNoStructuredOutput is returned by Result.Structured when the tool
// returned no structured output.
var ErrNoStructuredOutput = errors.New("toolwire: the response has no structured output")

// unknownCallErr reports whether err is the dispatcher's answer about a
// call id outside the caller's reach (NOT_FOUND "… unknown call …": an id
// nobody minted, another tenant's call, a call whose records are gone),
// which GetResult and GetOutput return as a StateError (ErrUnknownCall).
// A NOT_FOUND about a call's output that is no longer stored is not one.
func unknownCallErr(err error) bool {
	var ce *connect.Error
	return errors.As(err, &ce) && ce.Code() == connect.CodeNotFound && strings.Contains(ce.Message(), "unknown call")
}

// StateError is returned by Call and GetResult when there is no terminal
// response to return: the call is still pending (errors.Is ErrPending) or
// unknown (errors.Is ErrUnknownCall). It carries the call id, so that a
// pending call can be fetched later.
type StateError struct {
	// CallID is the call's id.
	CallID string
	// State is CALL_STATE_PENDING or CALL_STATE_UNKNOWN.
	State toolwirev1.CallState
	// Unconfirmed is set with PENDING when the calls stream had not yet
	// acknowledged the call (a partition or an election): it may run, and
	// the dispatcher goes on publishing it. Do not call again without the
	// same idempotency key: GetResult on CallID tells what became of it.
	Unconfirmed bool
}

// Error says the call's id and state.
func (e *StateError) Error() string {
	switch e.State {
	case toolwirev1.CallState_CALL_STATE_PENDING:
		return fmt.Sprintf("toolwire: call %s is pending", e.CallID)
	case toolwirev1.CallState_CALL_STATE_UNKNOWN:
		return fmt.Sprintf("toolwire: call %s is unknown", e.CallID)
	}
	return fmt.Sprintf("toolwire: call %s: unexpected state %s", e.CallID, e.State)
}

// Unwrap returns ErrPending or ErrUnknownCall, by State.
func (e *StateError) Unwrap() error {
	switch e.State {
	case toolwirev1.CallState_CALL_STATE_PENDING:
		return ErrPending
	case toolwirev1.CallState_CALL_STATE_UNKNOWN:
		return ErrUnknownCall
	}
	return nil
}
