package maintenance

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/startstop"
	"github.com/toolwire/toolwire/internal/telemetry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Mover consumes due retries (one durable consumer shared by every
// replica, bus.EnsureMover) and puts each call back on the calls stream,
// where its pool runs the next attempt. A worker parks a call there for a
// long retry delay so that the call holds no consumer slot while it waits.
type Mover struct {
	cfg Config
	svc *startstop.Funcs
}

var _ startstop.Service = (*Mover)(nil)

// NewMover returns a retry mover with cfg; Start starts it.
func NewMover(cfg Config) *Mover {
	mv := &Mover{cfg: cfg.WithDefaults()}
	mv.svc = consumption{name: "retry mover", cfg: mv.cfg, failed: "moving a due retry failed; will retry",
		ensure: func(ctx context.Context) (jetstream.Consumer, error) { return mv.cfg.Bus.EnsureMover(ctx) },
		handle: func(ctx context.Context, m jetstream.Msg) error { return mv.move(ctx, m.Data(), m.Headers()) },
	}.service()
	return mv
}

// Start makes (or finds) the mover's consumer and consumes it. It returns
// the configuration's Validate error, if any.
func (mv *Mover) Start(ctx context.Context) error {
	if err := mv.cfg.Validate(); err != nil {
		return err
	}
	return mv.svc.Start(ctx)
}

// Stop ends the consumption and waits for its last callback.
func (mv *Mover) Stop(ctx context.Context) error { return mv.svc.Stop(ctx) }

// move puts a due retry back on the calls stream, keeping the trace
// context the worker wrote into the schedule (the server copies a
// schedule's headers onto the message it produces).
func (mv *Mover) move(ctx context.Context, data []byte, hdr nats.Header) error {
	log, b := mv.cfg.Logger, mv.cfg.Bus
	call := &toolwirev1.ToolCall{}
	if err := proto.Unmarshal(data, call); err != nil || call.CallId == "" || call.Caller == nil {
		log.Error("dropping an undecodable due retry", "err", err)
		return nil
	}
	if !bus.ValidTenant(call.Caller.Tenant) {
		// Never mapped to a subject token (a.b would run as a_b); workers
		// only park calls of valid tenants, so this one was forged.
		log.Error("dropping a due retry whose tenant is no valid tenant name", "call_id", call.CallId)
		return nil
	}
	if why, err := mv.retryOfStoredCall(ctx, call, hdr); err != nil {
		return err
	} else if why != "" {
		// Not the retry of a stored call: a retry schedule is no way to
		// queue a call that admission never saw.
		log.Error("dropping a due retry that does not retry a stored call", "call_id", call.CallId, "reason", why)
		return nil
	}
	// The message id makes a repeated move within the duplicate window a
	// no-op; a later repeat finds the call's result and is acknowledged.
	msg := &nats.Msg{Subject: b.Subjects.Call(call.Executor, call.Caller.Tenant, call.Provider, call.Tool), Data: data,
		Header: telemetry.CopyTraceContext(nil, hdr)}
	_, err := b.JS.PublishMsg(ctx, msg,
		jetstream.WithMsgID(fmt.Sprintf("%s-r%d", call.CallId, call.Attempt)), jetstream.WithExpectStream(b.Config.CallsStream()))
	return err
}

// retryOfStoredCall checks that a due retry retries a call the calls
// stream holds: the schedule names the stream sequence of the delivery it
// retries (bus.RetryOfHeader), and the call stored there must equal it in
// every field but the attempt. It returns why not, or an error when the
// stored call cannot be read now (the move is tried again).
func (mv *Mover) retryOfStoredCall(ctx context.Context, due *toolwirev1.ToolCall, hdr nats.Header) (string, error) {
	b := mv.cfg.Bus
	seq, err := strconv.ParseUint(hdr.Get(bus.RetryOfHeader), 10, 64)
	if err != nil || seq == 0 {
		return "no " + bus.RetryOfHeader + " header", nil
	}
	m, err := b.Calls.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Sprintf("no call at sequence %d", seq), nil
	}
	if err != nil {
		return "", fmt.Errorf("maintenance: read the call a retry retries: %w", err)
	}
	stored := &toolwirev1.ToolCall{}
	if err := proto.Unmarshal(m.Data, stored); err != nil {
		return fmt.Sprintf("undecodable call at sequence %d", seq), nil
	}
	// Only a live call admission stored: the calls stream also holds
	// replays (shadow subjects, published by operators), which a retry
	// must never turn into live calls.
	if stored.Caller == nil || !bus.ValidTenant(stored.Caller.Tenant) ||
		m.Subject != b.Subjects.Call(stored.Executor, stored.Caller.Tenant, stored.Provider, stored.Tool) {
		return fmt.Sprintf("the message at sequence %d is no live call (subject %s)", seq, m.Subject), nil
	}
	stored.Attempt = due.Attempt
	if !proto.Equal(stored, due) {
		return fmt.Sprintf("the call at sequence %d is another call", seq), nil
	}
	return "", nil
}
