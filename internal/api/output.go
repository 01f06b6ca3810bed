package api

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/toolwire/toolwire/internal/dispatch"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// GetOutput reads a finished call's output text.
func (s *Service) GetOutput(ctx context.Context, req *connect.Request[toolwirev1.GetOutputRequest]) (*connect.Response[toolwirev1.GetOutputResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := noProfile(req.Header(), "GetOutput"); err != nil {
		return nil, err
	}
	resp, err := s.d.GetOutput(ctx, id, req.Msg)
	switch {
	case errors.Is(err, dispatch.ErrBadOutputRead):
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, dispatch.ErrOutputGone):
		return nil, connect.NewError(connect.CodeNotFound, err)
	case err != nil:
		return nil, toConnectErr(err)
	case resp.GetState() == toolwirev1.CallState_CALL_STATE_UNKNOWN:
		return nil, unknownCall(req.Msg.CallId)
	}
	return connect.NewResponse(resp), nil
}
