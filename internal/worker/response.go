package worker

import (
	"errors"
	"slices"
	"time"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The worker's answers are built by package envelope; what the worker
// adds is their meta: who answered, which attempt, when, and the
// isolation its host lacked.

// okResponse answers the call with what its attempt returned.
func (d *delivery) okResponse(res *tool.Result) *toolwirev1.ToolResponse {
	return envelope.OK(d.call.CallId, d.call.Tool, res, d.meta())
}

// errorResponse answers the call with te.
func (d *delivery) errorResponse(te *toolwirev1.ToolError) *toolwirev1.ToolResponse {
	return envelope.Error(d.call.CallId, d.call.Tool, te, d.meta())
}

// cancelled answers the call cancelled as ce says; suffix ends the
// message ("before it started"), fx says what the attempt may have
// changed.
func (d *delivery) cancelled(ce *CancelledError, suffix string, fx toolwirev1.PartialSideEffects) *toolwirev1.ToolResponse {
	return envelope.Cancelled(d.call.CallId, d.call.Tool,
		envelope.Cancel{By: ce.By, Reason: ce.Reason, Message: ce.Error() + suffix, SideEffects: fx}, d.meta())
}

// meta is the meta of the call's answer, timed by d.started and
// d.finished.
func (d *delivery) meta() *toolwirev1.ResponseMeta {
	return d.answerMeta(d.spec, d.started, d.finished)
}

// answerMeta is Worker.meta for this delivery's answer. The attempt it
// names is the last one this delivery took (d.took: its STARTED is the
// attempt's claim, or it ran it); an answer given before it took one
// (refused, cancelled, expired, UNKNOWN_OUTCOME, denied by the policy)
// names attempt 0, none, and one given between an in-process retry's
// backoff and its claim names the attempt before. The attempt under way
// (the delivery count, or the one after the last recorded) may be one
// another delivery claimed (a call put back after a scheduled retry is
// delivered from 1 again; an earlier worker may still be running, or a
// stale delivery's redelivery claim the next try first), and a result of
// a pool's key for an attempt another key claimed is not believed
// (internal/believed).
func (d *delivery) answerMeta(spec *toolwirev1.ToolSpec, started, finished time.Time) *toolwirev1.ResponseMeta {
	m := d.w.meta(d.call, spec, started, finished)
	m.Attempt = d.took
	return m
}

// meta records how the worker answered call: spec is the version it
// serves (nil for a refusal).
func (w *Worker) meta(call *toolwirev1.ToolCall, spec *toolwirev1.ToolSpec, started, finished time.Time) *toolwirev1.ResponseMeta {
	m := &toolwirev1.ResponseMeta{
		Worker: w.cfg.Name, Attempt: call.Attempt, Source: "worker", Session: call.GetCaller().GetSession(), LoopCount: call.LoopCount,
		StartedAt: timestamppb.New(started), FinishedAt: timestamppb.New(finished),
		Duration: durationpb.New(finished.Sub(started)), AcceptedAt: call.AcceptedAt, SpecVersion: call.SpecVersion,
	}
	if spec != nil {
		if m.SpecVersion == "" {
			m.SpecVersion = spec.Version
		}
		m.IsolationGaps = w.gaps[spec.Executor]
		if si := w.specGaps[spec.Executor]; si != nil {
			if extra := si.SpecIsolationGaps(spec); len(extra) > 0 {
				m.IsolationGaps = slices.Concat(m.IsolationGaps, extra)
			}
		}
	}
	return m
}

// cancelledSideEffects says what an interrupted attempt may have changed:
// what the tool reported, else nothing for read-only tools, else unknown.
func cancelledSideEffects(spec *toolwirev1.ToolSpec, err error) toolwirev1.PartialSideEffects {
	var te *tool.Error
	if errors.As(err, &te) && te.SideEffects != toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNSPECIFIED &&
		te.Type != toolwirev1.ErrorType_ERROR_TYPE_CANCELLED && te.Type != toolwirev1.ErrorType_ERROR_TYPE_TIMEOUT {
		return te.SideEffects
	}
	if spec.GetAnnotations().GetReadOnly() {
		return toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE
	}
	return toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN
}
