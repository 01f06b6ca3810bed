package dispatch

import (
	"time"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The responses and errors the dispatcher itself answers (source
// "dispatcher"): nothing ran.

// preExec is a refusal before execution: no side effects.
func preExec(t toolwirev1.ErrorType, msg string) *toolwirev1.ToolError {
	return &toolwirev1.ToolError{Type: t, Message: msg, PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE}
}

// rejection is the terminal response of a call refused with te at now.
func rejection(callID, tool string, te *toolwirev1.ToolError, now time.Time) *toolwirev1.ToolResponse {
	ts := timestamppb.New(now)
	return &toolwirev1.ToolResponse{EnvelopeVersion: 1, CallId: callID, Tool: tool, Ok: false, Error: te,
		Meta: &toolwirev1.ResponseMeta{Source: "dispatcher", AcceptedAt: ts, StartedAt: ts, FinishedAt: ts, Duration: durationpb.New(0)}}
}

// internalResponse answers a call whose stored result cannot be read.
func internalResponse(callID, msg string) *toolwirev1.ToolResponse {
	return &toolwirev1.ToolResponse{EnvelopeVersion: 1, CallId: callID, Ok: false,
		Error: &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, Message: msg,
			PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN}}
}
