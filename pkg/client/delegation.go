package client

import (
	"context"

	"connectrpc.com/connect"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// GetDelegation returns a call's place in its delegation chain: its
// ancestors, parent first, up to the root, and its direct children (at
// most 20, MoreChildren counting the rest), each with its tool and state
// — only calls of your tenant that your key may see. A call outside your
// reach is a *StateError matching ErrUnknownCall; other failures a
// transport error wrapping the *connect.Error.
func (c *Client) GetDelegation(ctx context.Context, callID string) (*toolwirev1.GetDelegationResponse, error) {
	resp, err := c.rpc.GetDelegation(ctx, connect.NewRequest(&toolwirev1.GetDelegationRequest{CallId: callID}))
	if unknownCallErr(err) {
		return nil, &StateError{CallID: callID, State: toolwirev1.CallState_CALL_STATE_UNKNOWN}
	}
	if err != nil {
		return nil, transportError("get delegation of "+callID, err)
	}
	return resp.Msg, nil
}
