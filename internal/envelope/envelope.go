package envelope

import (
	"time"

	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Version is the envelope version of every response toolwire builds
// (ToolResponse.envelope_version).
const Version = 1

// OK answers call callID of toolName with what an attempt returned; res
// must not be nil.
func OK(callID, toolName string, res *tool.Result, meta *toolwirev1.ResponseMeta) *toolwirev1.ToolResponse {
	return &toolwirev1.ToolResponse{EnvelopeVersion: Version, CallId: callID, Tool: toolName, Ok: true,
		Content: res.Content, StructuredJson: string(res.Structured), Intents: res.Intents, MetaJson: string(res.Meta),
		Meta: meta}
}

// Error answers call callID of toolName with te.
func Error(callID, toolName string, te *toolwirev1.ToolError, meta *toolwirev1.ResponseMeta) *toolwirev1.ToolResponse {
	return &toolwirev1.ToolResponse{EnvelopeVersion: Version, CallId: callID, Tool: toolName, Ok: false, Error: te, Meta: meta}
}

// Cancel says who cancelled a call and why, and what its answer says.
type Cancel struct {
	// By and Reason are the cancel's (its tombstone's); the answer's meta
	// records them as cancelled_by and cancel_reason.
	By, Reason string
	// Message is the CANCELLED error's message.
	Message string
	// SideEffects is what the interrupted attempt may have changed: NONE
	// when no attempt ran.
	SideEffects toolwirev1.PartialSideEffects
}

// Cancelled answers call callID of toolName, cancelled as c says: a
// CANCELLED error, and meta (which it fills in) naming who cancelled and
// why.
func Cancelled(callID, toolName string, c Cancel, meta *toolwirev1.ResponseMeta) *toolwirev1.ToolResponse {
	meta.CancelledBy, meta.CancelReason = c.By, c.Reason
	return Error(callID, toolName, Interrupted(c.Message, c.SideEffects), meta)
}

// Interrupted is the CANCELLED error of a call whose attempt was
// interrupted or never started (by its caller, by a shutdown), with what
// the attempt may have changed.
func Interrupted(msg string, fx toolwirev1.PartialSideEffects) *toolwirev1.ToolError {
	return &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, Message: msg, PartialSideEffects: fx}
}

// NotRun is the error of a call handed back without running, which may
// run later: TRANSIENT, retryable, no side effects.
func NotRun(msg string) *toolwirev1.ToolError {
	return &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT, Retryable: true, Message: msg,
		PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
}

// Rejection is the dispatcher's answer to a call it refused at admission
// at the moment at: nothing ran, so it started and finished then.
func Rejection(callID, toolName string, te *toolwirev1.ToolError, at time.Time) *toolwirev1.ToolResponse {
	ts := timestamppb.New(at)
	return Error(callID, toolName, te,
		&toolwirev1.ResponseMeta{Source: "dispatcher", AcceptedAt: ts, StartedAt: ts, FinishedAt: ts, Duration: durationpb.New(0)})
}

// PreExec is the error of a call that never ran: it is not retryable and
// had no side effects.
func PreExec(t toolwirev1.ErrorType, msg string) *toolwirev1.ToolError {
	return &toolwirev1.ToolError{Type: t, Message: msg, Retryable: false,
		PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
}

// Overloaded is the error of a call refused because toolwire is
// overloaded: retryable after retryAfter, nothing ran.
func Overloaded(msg string, retryAfter time.Duration) *toolwirev1.ToolError {
	return &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED, Retryable: true, Message: msg,
		PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, RetryAfter: durationpb.New(retryAfter)}
}

// Internal is an INTERNAL error of toolwire itself (a stored result it
// cannot read, say): what the call changed is unknown.
func Internal(msg string) *toolwirev1.ToolError {
	return &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, Message: msg,
		PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN}
}

// DeadLettered is the dispatcher's answer to a call it dead-lettered
// without an answer from a worker (the reaper: attempts exhausted; the
// orphan sweeper: a call no pool consumes) at the moment at, after
// attempts deliveries (0 when none is known): meta.source "dlq", the
// call's spec version, session and admission time, started and finished
// at, duration 0.
func DeadLettered(call *toolwirev1.ToolCall, te *toolwirev1.ToolError, attempts int32, at time.Time) *toolwirev1.ToolResponse {
	ts := timestamppb.New(at)
	return Error(call.GetCallId(), call.GetTool(), te, &toolwirev1.ResponseMeta{Source: "dlq", Attempt: attempts,
		SpecVersion: call.GetSpecVersion(), Session: call.GetCaller().GetSession(), AcceptedAt: call.GetAcceptedAt(),
		StartedAt: ts, FinishedAt: ts, Duration: durationpb.New(0)})
}

// Expired is the error of a call whose deadline passed before it started:
// PreExec with EXPIRED.
func Expired(msg string) *toolwirev1.ToolError {
	return PreExec(toolwirev1.ErrorType_ERROR_TYPE_EXPIRED, msg)
}
