package dlq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ErrNotRetryable is returned by Retry for a dead letter that holds no
// decodable call (raw bytes only): there is nothing to republish; or whose
// call names a tenant that is not bus.ValidTenant.
var ErrNotRetryable = errors.New("dlq: the dead letter holds no decodable call")

// ErrNoAdmissionRecord is returned, with the new call, by Retry when the
// call was queued but its ACCEPTED event was not stored. The call runs;
// GetResult with a wait still finds its result, but GetResult without
// one and Watch may report it unknown until it finishes.
var ErrNoAdmissionRecord = errors.New("dlq: the retried call was queued, but its admission record was not stored")

// Retry republishes the call of the dead letter at sequence seq as a new
// call (see the package doc for what is carried over) and returns it; its
// CallId is the new call's id. The dead letter stays in the DLQ.
//
// Retry returns an error matching ErrNotFound for no such letter,
// ErrNotRetryable for a letter without a decodable call, ErrSessionInactive,
// ErrModeRestricted or ErrPolicyDenies for a call q's Check refuses now
// (CheckWith; nothing is queued), or the server's
// refusal (for instance a full calls stream). When the call was queued but
// its admission record was not, it returns the call and an error matching
// ErrNoAdmissionRecord.
func (q *Queue) Retry(ctx context.Context, seq uint64) (*toolwirev1.ToolCall, error) {
	return q.RetryBy(ctx, seq, "")
}

// RetryBy is Retry, with who asked for it (tenant/agent and where, for
// instance "acme/ops (dashboard)") named in the new call's admission
// record; "" names no one.
func (q *Queue) RetryBy(ctx context.Context, seq uint64, by string) (*toolwirev1.ToolCall, error) {
	l, err := q.Get(ctx, seq)
	if err != nil {
		return nil, err
	}
	dead := l.Record.GetCall()
	if dead == nil {
		return nil, fmt.Errorf("%w at sequence %d (%s)", ErrNotRetryable, seq, l.Record.GetReason())
	}
	if t := dead.GetCaller().GetTenant(); !bus.ValidTenant(t) {
		// Never mapped to a subject token: the retry would run as another
		// tenant (a.b as a_b).
		return nil, fmt.Errorf("%w at sequence %d: tenant %q does not match %s", ErrNotRetryable, seq, t, bus.TenantPattern)
	}
	call := retryOf(dead, time.Now())
	if err := q.checkRetry(ctx, call, dead.CallId, seq); err != nil {
		return nil, err
	}
	data, err := proto.Marshal(call)
	if err != nil {
		return nil, fmt.Errorf("dlq: encode call: %w", err)
	}
	tenant := call.GetCaller().GetTenant()
	subject := q.subj.Call(call.Executor, tenant, call.Provider, call.Tool)
	if _, err := q.js.Publish(ctx, subject, data, jetstream.WithMsgID(call.CallId), jetstream.WithExpectStream(q.cfg.CallsStream())); err != nil {
		return nil, fmt.Errorf("dlq: queue the retry of %s: %w", dead.CallId, err)
	}
	ev := &toolwirev1.CallEvent{CallId: call.CallId, Tool: call.Tool, Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED,
		Time: call.AcceptedAt, Caller: call.Caller, SpecVersion: call.SpecVersion, Deadline: call.Deadline,
		Message: fmt.Sprintf("retry of call %s from dead letter %d", dead.CallId, seq)}
	if by != "" {
		ev.Message += ", asked by " + by
	}
	if data, err = proto.Marshal(ev); err == nil {
		msg := &nats.Msg{Subject: q.subj.Event(tenant, call.Dispatcher, call.CallId), Data: data}
		if q.signer != nil {
			msg = q.signer.SignedMsg(msg.Subject, signing.KindEvent, call.CallId, ev.Attempt, data, nil)
		}
		_, err = q.js.PublishMsg(ctx, msg)
	}
	if err != nil {
		return call, fmt.Errorf("%w (call %s): %w", ErrNoAdmissionRecord, call.CallId, err)
	}
	return call, nil
}

// retryOf returns the new call that retries dead, accepted at now.
func retryOf(dead *toolwirev1.ToolCall, now time.Time) *toolwirev1.ToolCall {
	call := proto.Clone(dead).(*toolwirev1.ToolCall)
	call.CallId = ulid.MustNew(ulid.Timestamp(now), ulid.DefaultEntropy()).String()
	call.Attempt = 0
	call.AcceptedAt = timestamppb.New(now)
	call.ScheduleToStartDeadline = nil
	call.Deadline = nil
	call.IdempotencyKey = ""
	return call
}
