package api_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/api"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1/toolwirev1connect"
)

// call calls o and waits up to 20s for its result (as internal/dispatch's
// tests do).
func call(t *testing.T, c toolwirev1connect.DispatcherServiceClient, o *toolwirev1.CallRequest) *toolwirev1.CallResponse {
	t.Helper()
	o.Wait = durationpb.New(20 * time.Second)
	resp, err := c.Call(t.Context(), connect.NewRequest(o))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, resp.Msg.State)
	return resp.Msg
}

// SubmitRequest and CallRequest share fields 1-12 and 16-18 by number,
// name and kind, so that one converts into the other on the wire (CallOf).
func TestSubmitAndCallRequestsAgree(t *testing.T) {
	t.Parallel()
	sf := (&toolwirev1.SubmitRequest{}).ProtoReflect().Descriptor().Fields()
	cf := (&toolwirev1.CallRequest{}).ProtoReflect().Descriptor().Fields()
	require.Equal(t, sf.Len()+3, cf.Len(), "CallRequest has exactly three more fields: wait, apply_intents and wait_for_approval")
	for i := range sf.Len() {
		f := sf.Get(i)
		g := cf.ByNumber(f.Number())
		require.NotNil(t, g, f.Name())
		require.Equal(t, f.Name(), g.Name())
		require.Equal(t, f.Kind(), g.Kind(), f.Name())
	}
	require.Equal(t, "wait", string(cf.ByNumber(13).Name()))
	got := api.CallOf(&toolwirev1.SubmitRequest{Tool: "t", ArgumentsJson: "{}", Session: "s", ApprovalToken: "a",
		Continues: "c", InputResponsesJson: map[string]string{"k": "{}"}})
	require.Equal(t, "c", got.Continues)
	require.Equal(t, map[string]string{"k": "{}"}, got.InputResponsesJson)
	require.Equal(t, "t", got.Tool)
	require.Equal(t, "s", got.Session)
	require.Equal(t, "a", got.ApprovalToken)
}
