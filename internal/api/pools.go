package api

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// errPoolsScope: the pools serve every tenant, so listing them needs the
// "installation" scope (as the dashboard's pools page does).
var errPoolsScope = errors.New(`api: the pools are the installation's, shared by every tenant: listing them needs the "installation" scope`)

// ListPools lists the pools as this replica last read them, with their
// pauses (internal/dispatch doc.go, "Paused pools").
func (s *Service) ListPools(ctx context.Context, _ *connect.Request[toolwirev1.ListPoolsRequest]) (*connect.Response[toolwirev1.ListPoolsResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	if !id.CrossesTenants() {
		return nil, connect.NewError(connect.CodePermissionDenied, errPoolsScope)
	}
	out := &toolwirev1.ListPoolsResponse{}
	for _, ps := range s.d.Pools() {
		p := &toolwirev1.Pool{Name: ps.Pool, Consumer: ps.Consumer, Queued: ps.Queued, InFlight: ps.InFlight}
		if pause := ps.Pause; pause != nil {
			p.Paused, p.PauseDrift = pause.Paused, pause.Drift
			if r := pause.Record; r != nil {
				p.PausedBy, p.PausedAt, p.PauseReason = r.By, timestamppb.New(r.At), r.Reason
			}
		}
		out.Pools = append(out.Pools, p)
	}
	return connect.NewResponse(out), nil
}

// PausePool pauses a pool (dispatch.Dispatcher.PausePool).
func (s *Service) PausePool(ctx context.Context, req *connect.Request[toolwirev1.PausePoolRequest]) (*connect.Response[toolwirev1.PausePoolResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	rec, err := s.d.PausePool(ctx, id, req.Msg.Pool, req.Msg.Reason)
	if err != nil {
		return nil, poolError(err)
	}
	return connect.NewResponse(&toolwirev1.PausePoolResponse{PausedBy: rec.By, PausedAt: timestamppb.New(rec.At)}), nil
}

// ResumePool ends a pool's pause (dispatch.Dispatcher.ResumePool).
func (s *Service) ResumePool(ctx context.Context, req *connect.Request[toolwirev1.ResumePoolRequest]) (*connect.Response[toolwirev1.ResumePoolResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.d.ResumePool(ctx, id, req.Msg.Pool); err != nil {
		return nil, poolError(err)
	}
	return connect.NewResponse(&toolwirev1.ResumePoolResponse{}), nil
}

// poolError is the API's answer to a failed pause or resume.
func poolError(err error) error {
	switch {
	case errors.Is(err, dispatch.ErrPauseScope):
		return connect.NewError(connect.CodePermissionDenied, err)
	case errors.Is(err, dispatch.ErrNoPool):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, dispatch.ErrPauseReason):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, bus.ErrPauseOverlapped):
		// An answer, not an outage: the replica acted and other changes
		// undid it; aborted is "try again at a higher level".
		return connect.NewError(connect.CodeAborted, err)
	}
	return connect.NewError(connect.CodeUnavailable, err)
}
