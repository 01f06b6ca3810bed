package maintenance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/startstop"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// maxDeliverAdvisory is the part of the server's MaxDeliver advisory the
// reaper reads.
type maxDeliverAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// Reaper consumes the captured MaxDeliver advisories (one durable consumer
// shared by every replica, bus.EnsureReaper) and ends each exhausted call
// that has no result yet: a dead letter and a terminal MAX_ATTEMPTS
// answer, so no caller hangs when every delivery crashed.
type Reaper struct {
	cfg Config
	svc *startstop.Funcs
}

var _ startstop.Service = (*Reaper)(nil)

// NewReaper returns a reaper with cfg; Start starts it.
func NewReaper(cfg Config) *Reaper {
	r := &Reaper{cfg: cfg.WithDefaults()}
	r.svc = consumption{name: "reaper", cfg: r.cfg, failed: "reaping exhausted call failed; will retry",
		ensure: func(ctx context.Context) (jetstream.Consumer, error) { return r.cfg.Bus.EnsureReaper(ctx) },
		handle: func(ctx context.Context, m jetstream.Msg) error { return r.reap(ctx, m.Data()) },
	}.service()
	return r
}

// Start makes (or finds) the reaper's consumer and consumes it. It
// returns the configuration's Validate error, if any.
func (r *Reaper) Start(ctx context.Context) error {
	if err := r.cfg.Validate(); err != nil {
		return err
	}
	return r.svc.Start(ctx)
}

// Stop ends the consumption and waits for its last callback.
func (r *Reaper) Stop(ctx context.Context) error { return r.svc.Stop(ctx) }

// reap ends the call an advisory names, unless it has a result.
func (r *Reaper) reap(ctx context.Context, advisory []byte) error {
	b, subj := r.cfg.Bus, r.cfg.Bus.Subjects
	var adv maxDeliverAdvisory
	if err := json.Unmarshal(advisory, &adv); err != nil || adv.StreamSeq == 0 {
		r.cfg.Logger.Warn("ignoring unreadable MaxDeliver advisory", "err", err)
		return nil
	}
	raw, err := b.Calls.GetMsg(ctx, adv.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		// Aged out, or a replica that lags answered the direct get: only
		// the leader's first sequence tells.
		agedOut, err := r.agedOut(ctx, adv.StreamSeq)
		if err != nil {
			return fmt.Errorf("call %d not found; is it aged out: %w", adv.StreamSeq, err)
		}
		if !agedOut {
			return fmt.Errorf("call %d: %w on a replica; the leader still holds it", adv.StreamSeq, jetstream.ErrMsgNotFound)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("load call %d: %w", adv.StreamSeq, err)
	}
	// The advisory's stream sequence makes the record idempotent across
	// reaper retries within the duplicate window.
	msgID := fmt.Sprintf("reap-%d", adv.StreamSeq)
	dl := &toolwirev1.DeadLetter{Subject: raw.Subject, Attempts: int32(adv.Deliveries), Time: timestamppb.Now(),
		Worker: "reaper:" + r.cfg.Name}
	call := &toolwirev1.ToolCall{}
	if err := proto.Unmarshal(raw.Data, call); err != nil || call.CallId == "" {
		dl.Raw, dl.Reason = raw.Data, "undecodable call exhausted MaxDeliver"
		return deadLetter(ctx, b, dl, msgID)
	}
	if !answerable(raw.Subject, call) {
		// No answer into a tenant's results on a stranger's word, nor under
		// a mapped tenant name.
		dl.Raw, dl.Reason = raw.Data, "call exhausted MaxDeliver; its tenant cannot be answered"
		return deadLetter(ctx, b, dl, msgID)
	}
	subject := subj.Result(call.GetCaller().GetTenant(), call.Dispatcher, call.CallId)
	if ok, err := answered(ctx, b, subject, call.Tool); err == nil && ok {
		return nil // answered after all
	}
	te := &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_MAX_ATTEMPTS,
		Message:            fmt.Sprintf("no attempt finished after %d deliveries (workers crashed or stalled)", adv.Deliveries),
		PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN}
	dl.Call, dl.Reason, dl.LastError = call, "MaxDeliver exhausted", te
	if err := deadLetter(ctx, b, dl, msgID); err != nil {
		return err
	}
	if err := answer(ctx, b, subject, envelope.DeadLettered(call, te, int32(adv.Deliveries), time.Now())); err != nil {
		return fmt.Errorf("publish MAX_ATTEMPTS: %w", err)
	}
	return nil
}

// agedOut reports whether the calls stream's leader no longer holds
// sequence seq (its first sequence is past it).
func (r *Reaper) agedOut(ctx context.Context, seq uint64) (bool, error) {
	info, err := r.cfg.Bus.Calls.Info(ctx)
	if err != nil {
		return false, err
	}
	return info.State.FirstSeq > seq, nil
}
