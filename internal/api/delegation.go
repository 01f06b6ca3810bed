package api

import (
	"context"

	"connectrpc.com/connect"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// GetDelegation returns a call's place in its delegation chain: a call
// outside the caller's reach is NOT_FOUND, as in GetResult.
func (s *Service) GetDelegation(ctx context.Context, req *connect.Request[toolwirev1.GetDelegationRequest]) (*connect.Response[toolwirev1.GetDelegationResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := noProfile(req.Header(), "GetDelegation"); err != nil {
		return nil, err
	}
	resp, err := s.d.GetDelegation(ctx, id, req.Msg.CallId)
	if err != nil {
		return nil, toConnectErr(err)
	}
	if resp.GetState() == toolwirev1.CallState_CALL_STATE_UNKNOWN {
		return nil, unknownCall(req.Msg.CallId)
	}
	return connect.NewResponse(resp), nil
}
