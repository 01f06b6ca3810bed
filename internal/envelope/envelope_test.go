package envelope_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

const none = toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE

// Every constructor's envelope, field by field.
func TestEnvelopes(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 4, 4, 0, 0, time.UTC)
	ts := timestamppb.New(at)
	meta := func() *toolwirev1.ResponseMeta { return &toolwirev1.ResponseMeta{Worker: "w1", Attempt: 2} }
	res := &tool.Result{Content: []*toolwirev1.Content{tool.Text("hi")}, Structured: []byte(`{"a":1}`),
		Intents: []*toolwirev1.Intent{{Id: "i1", Type: "NOTIFY"}}, Meta: []byte(`{"m":true}`)}
	te := &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL, Message: "boom"}
	for name, c := range map[string]struct{ got, want proto.Message }{
		"ok": {envelope.OK("01C", "echo", res, meta()), &toolwirev1.ToolResponse{EnvelopeVersion: 1, CallId: "01C", Tool: "echo", Ok: true,
			Content: res.Content, StructuredJson: `{"a":1}`, Intents: res.Intents, MetaJson: `{"m":true}`, Meta: meta()}},
		"ok, empty result": {envelope.OK("01C", "echo", &tool.Result{}, nil),
			&toolwirev1.ToolResponse{EnvelopeVersion: 1, CallId: "01C", Tool: "echo", Ok: true}},
		"error": {envelope.Error("01C", "echo", te, meta()),
			&toolwirev1.ToolResponse{EnvelopeVersion: 1, CallId: "01C", Tool: "echo", Error: te, Meta: meta()}},
		"cancelled": {envelope.Cancelled("01C", "echo", envelope.Cancel{By: "ops", Reason: "stop", Message: "cancelled by ops: stop",
			SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN}, meta()),
			&toolwirev1.ToolResponse{EnvelopeVersion: 1, CallId: "01C", Tool: "echo",
				Error: &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, Message: "cancelled by ops: stop",
					PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN},
				Meta: &toolwirev1.ResponseMeta{Worker: "w1", Attempt: 2, CancelledBy: "ops", CancelReason: "stop"}}},
		"rejection": {envelope.Rejection("01C", "echo", te, at), &toolwirev1.ToolResponse{EnvelopeVersion: 1, CallId: "01C", Tool: "echo",
			Error: te, Meta: &toolwirev1.ResponseMeta{Source: "dispatcher", AcceptedAt: ts, StartedAt: ts, FinishedAt: ts,
				Duration: durationpb.New(0)}}},
		"pre-execution error": {envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, "no such tool"),
			&toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, Message: "no such tool", PartialSideEffects: none}},
		"interrupted": {envelope.Interrupted("worker shutting down", toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN),
			&toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, Message: "worker shutting down",
				PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN}},
		"not run": {envelope.NotRun("handed back"), &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_TRANSIENT,
			Retryable: true, Message: "handed back", PartialSideEffects: none}},
		"overloaded": {envelope.Overloaded("busy", 1500*time.Millisecond), &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED,
			Retryable: true, Message: "busy", PartialSideEffects: none, RetryAfter: durationpb.New(1500 * time.Millisecond)}},
		"internal": {envelope.Internal("unreadable"), &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL,
			Message: "unreadable", PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN}},
		"dead-lettered": {envelope.DeadLettered(&toolwirev1.ToolCall{CallId: "01C", Tool: "echo", SpecVersion: "v1",
			Caller: &toolwirev1.Caller{Session: "s1"}, AcceptedAt: timestamppb.New(at.Add(-time.Minute))}, te, 5, at),
			&toolwirev1.ToolResponse{EnvelopeVersion: 1, CallId: "01C", Tool: "echo", Error: te,
				Meta: &toolwirev1.ResponseMeta{Source: "dlq", Attempt: 5, SpecVersion: "v1", Session: "s1",
					AcceptedAt: timestamppb.New(at.Add(-time.Minute)), StartedAt: ts, FinishedAt: ts, Duration: durationpb.New(0)}}},
		"expired": {envelope.Expired("too late"),
			&toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_EXPIRED, Message: "too late", PartialSideEffects: none}},
	} {
		require.True(t, proto.Equal(c.want, c.got), "%s:\nwant %v\n got %v", name, c.want, c.got)
	}
}

// The envelope version is the contract's: 1.
func TestVersion(t *testing.T) {
	t.Parallel()
	require.EqualValues(t, 1, envelope.Version)
	require.EqualValues(t, envelope.Version, envelope.Error("c", "t", nil, nil).GetEnvelopeVersion())
}
