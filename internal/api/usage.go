package api

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/limitgate"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// GetUsage reads the limits in force for the caller's tenant
// (limitgate.Gate.Report).
func (s *Service) GetUsage(ctx context.Context, req *connect.Request[toolwirev1.GetUsageRequest]) (*connect.Response[toolwirev1.GetUsageResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	r, err := s.usage.Report(ctx, id, limitgate.UsageFilter{Agent: m.Agent, Session: m.Session, User: m.User, Run: m.Run})
	switch {
	case errors.Is(err, limitgate.ErrBadFilter):
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, limitgate.ErrNotYours):
		return nil, connect.NewError(connect.CodePermissionDenied, err)
	case err != nil:
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	out := &toolwirev1.GetUsageResponse{PolicyVersion: r.PolicyVersion}
	for _, u := range r.Limits {
		out.Limits = append(out.Limits, usageProto(u))
	}
	return connect.NewResponse(out), nil
}

// usageProto is the API form of one limit's usage.
func usageProto(u limitgate.Usage) *toolwirev1.LimitUsage {
	lu := &toolwirev1.LimitUsage{Limit: u.Limit, Reason: u.Reason, Key: u.Key, Value: u.Value,
		Concurrency: int32(u.Concurrency), InFlight: int32(u.InFlight), Used: u.Used, Remaining: u.Remaining}
	if r := u.Rate; r != nil {
		lu.RateCount, lu.RatePer, lu.RateBurst = r.Count, durationpb.New(r.Per), r.Burst
	}
	if b := u.Budget; b != nil {
		lu.BudgetUnits, lu.BudgetWindow = b.Units, durationpb.New(b.Window)
		if !u.ResetAt.IsZero() {
			lu.ResetAt = timestamppb.New(u.ResetAt)
		}
	}
	return lu
}
