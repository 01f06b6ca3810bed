package dispatch

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/limits"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// maxUsageField bounds each name a GetUsage request carries.
const maxUsageField = limits.MaxInputBytes

// GetUsage reads the limits in force for the caller's tenant (Usage).
func (s *Service) GetUsage(ctx context.Context, req *connect.Request[toolwirev1.GetUsageRequest]) (*connect.Response[toolwirev1.GetUsageResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	for _, v := range []string{m.Agent, m.Session, m.User, m.Run} {
		if len(v) > maxUsageField {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("a name of %d bytes; at most %d", len(v), maxUsageField))
		}
	}
	us, err := s.d.Usage(ctx, id, UsageFilter{Agent: m.Agent, Session: m.Session, User: m.User, Run: m.Run})
	switch {
	case errors.Is(err, ErrNotYours):
		return nil, connect.NewError(connect.CodePermissionDenied, err)
	case err != nil:
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	out := &toolwirev1.GetUsageResponse{PolicyVersion: s.d.policyFor(id.Tenant).Version()}
	for _, u := range us {
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
		out.Limits = append(out.Limits, lu)
	}
	return connect.NewResponse(out), nil
}
