package client_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/pkg/client"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The one envelope pkg/client builds itself (it may not import
// internal/envelope): Final's answer for a REJECTED event carries the
// envelope version toolwire's own envelopes do.
func TestFinalRejectionIsAnEnvelope(t *testing.T) {
	t.Parallel()
	at := timestamppb.Now()
	te := &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, Message: "bad"}
	res := client.Final(&toolwirev1.CallEvent{Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED, CallId: "c", Tool: "echo",
		Error: te, Time: at})
	require.NotNil(t, res)
	require.EqualValues(t, envelope.Version, res.Response.GetEnvelopeVersion())
	require.Equal(t, "c", res.Response.GetCallId())
	require.Equal(t, "echo", res.Response.GetTool())
	require.False(t, res.Response.GetOk())
	require.Equal(t, "dispatcher", res.Response.GetMeta().GetSource())
}
