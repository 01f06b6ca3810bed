package dispatch

import (
	"context"
	"time"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// buildCall is the step that makes the call as it will be published: it
// pins the spec version and carries as deadlines the tighter of the tool's
// and the request's schedule-to-start and schedule-to-close timeouts. The
// caller's mode is the session's (the session step read it).
func (a *admission) buildCall(_ context.Context) verdict {
	d := a.d
	o, spec, now := a.req, a.spec, a.now
	call := &toolwirev1.ToolCall{
		CallId: a.callID, Tool: spec.Name, SpecVersion: spec.Version, Arguments: a.args,
		Caller: callerOf(a.id, o), IdempotencyKey: o.IdempotencyKey, AcceptedAt: timestamppb.New(now),
		ApprovalToken: o.ApprovalToken, Dispatcher: d.cfg.Name, Executor: spec.Executor, Provider: spec.Provider,
		Input: a.round, ClientCapabilitiesJson: o.ClientCapabilitiesJson,
	}
	t := spec.GetTimeouts()
	if s2s := tighter(t.GetScheduleToStart().AsDuration(), o.ScheduleToStart.AsDuration()); s2s > 0 {
		call.ScheduleToStartDeadline = timestamppb.New(now.Add(s2s))
	}
	if s2c := tighter(t.GetScheduleToClose().AsDuration(), o.ScheduleToClose.AsDuration()); s2c > 0 {
		call.Deadline = timestamppb.New(now.Add(s2c))
	}
	call.Caller.Mode = a.session.Mode // the session step's: never the caller's to say
	// The model is the request's claim; its family the toolset step's,
	// derived with the policy in force (admit_toolset.go).
	call.Caller.Model, call.Caller.ModelFamily = o.Model, a.family
	a.call = call
	return next
}

// tighter returns the smaller positive duration; 0 when neither is set.
func tighter(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	}
	return min(a, b)
}
