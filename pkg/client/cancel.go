package client

import (
	"context"

	"connectrpc.com/connect"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Cancel asks for the call callID to stop, giving reason (recorded in the
// call's events and in its CANCELLED response). A call that has not
// started never runs; a running call's context is cancelled, and it
// answers CANCELLED with its partial side effects. Any dispatcher replica
// cancels any call of the caller's tenant.
//
// Cancelling is harmless to repeat, so the outcome is not an error:
//
//   - CANCEL_OUTCOME_REQUESTED: the cancel is recorded (now, or by an
//     earlier Cancel); the call's result will say CANCELLED unless it
//     finished first.
//   - CANCEL_OUTCOME_ALREADY_FINISHED: the call had its terminal response
//     (or was refused at admission); nothing changed.
//   - CANCEL_OUTCOME_UNKNOWN_CALL: no such call in the caller's tenant;
//     nothing changed.
//
// The error is a transport error wrapping the *connect.Error, after which
// whether the cancel was recorded is unknown; Cancel is safe to retry.
func (c *Client) Cancel(ctx context.Context, callID, reason string) (toolwirev1.CancelOutcome, error) {
	resp, err := c.rpc.Cancel(ctx, connect.NewRequest(&toolwirev1.CancelRequest{CallId: callID, Reason: reason}))
	if err != nil {
		return toolwirev1.CancelOutcome_CANCEL_OUTCOME_UNSPECIFIED, transportError("cancel "+callID, err)
	}
	return resp.Msg.GetOutcome(), nil
}
