package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/envelope"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// maxDeliverAdvisory is the part of the server's MaxDeliver advisory the
// reaper reads.
type maxDeliverAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// startReaper consumes the captured MaxDeliver advisories (one durable
// consumer shared by every replica) and ends each exhausted call that has
// no result yet: a dead letter and a terminal MAX_ATTEMPTS answer, so no
// caller hangs when every delivery crashed.
func (d *Dispatcher) startReaper(ctx context.Context) (jetstream.ConsumeContext, error) {
	cons, err := d.bus.EnsureReaper(ctx)
	if err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.reap(rctx, m.Data()); err != nil {
			d.log.Error("reaping exhausted call failed; will retry", "err", err)
			_ = m.NakWithDelay(time.Second)
			return
		}
		if err := m.Ack(); err != nil {
			d.log.Warn("reaper ack failed", "err", err)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("dispatch: reaper: %w", err)
	}
	return cc, nil
}

func (d *Dispatcher) reap(ctx context.Context, advisory []byte) error {
	var adv maxDeliverAdvisory
	if err := json.Unmarshal(advisory, &adv); err != nil || adv.StreamSeq == 0 {
		d.log.Warn("ignoring unreadable MaxDeliver advisory", "err", err)
		return nil
	}
	raw, err := d.bus.Calls.GetMsg(ctx, adv.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil // aged out
	}
	if err != nil {
		return fmt.Errorf("load call %d: %w", adv.StreamSeq, err)
	}
	typ := toolwirev1.ExecutorType_EXECUTOR_TYPE_UNSPECIFIED
	call := &toolwirev1.ToolCall{}
	if err := proto.Unmarshal(raw.Data, call); err != nil || call.CallId == "" {
		dl := &toolwirev1.DeadLetter{Raw: raw.Data, Subject: raw.Subject, Reason: "undecodable call exhausted MaxDeliver",
			Attempts: int32(adv.Deliveries), Time: timestamppb.Now(), Worker: "reaper:" + d.cfg.Name}
		return d.publishDLQ(ctx, d.subj.DLQ(typ, "_unknown", "_unknown", "_unknown"), dl, adv.StreamSeq)
	}
	if !answerable(raw.Subject, call) {
		// No answer into a tenant's results on a stranger's word, nor under
		// a mapped tenant name.
		dl := &toolwirev1.DeadLetter{Raw: raw.Data, Subject: raw.Subject, Reason: "call exhausted MaxDeliver; its tenant cannot be answered",
			Attempts: int32(adv.Deliveries), Time: timestamppb.Now(), Worker: "reaper:" + d.cfg.Name}
		return d.publishDLQ(ctx, d.subj.DLQ(typ, "_unknown", "_unknown", "_unknown"), dl, adv.StreamSeq)
	}
	subject := d.subj.Result(call.GetCaller().GetTenant(), call.Dispatcher, call.CallId)
	if _, err := d.bus.Results.GetLastMsgForSubject(ctx, subject); err == nil {
		return nil // answered after all
	}
	te := &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_MAX_ATTEMPTS,
		Message:            fmt.Sprintf("no attempt finished after %d deliveries (workers crashed or stalled)", adv.Deliveries),
		PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN}
	dl := &toolwirev1.DeadLetter{Call: call, Subject: raw.Subject, Reason: "MaxDeliver exhausted", LastError: te,
		Attempts: int32(adv.Deliveries), Time: timestamppb.Now(), Worker: "reaper:" + d.cfg.Name}
	if err := d.publishDLQ(ctx, d.subj.DLQ(call.Executor, call.GetCaller().GetTenant(), call.Provider, call.Tool), dl, adv.StreamSeq); err != nil {
		return err
	}
	resp := envelope.DeadLettered(call, te, int32(adv.Deliveries), time.Now())
	data, err := proto.Marshal(resp)
	if err != nil {
		return err
	}
	if _, err := d.bus.JS.Publish(ctx, subject, data, jetstream.WithExpectLastSequencePerSubject(0)); err != nil && !bus.IsWrongLastSequence(err) {
		return fmt.Errorf("publish MAX_ATTEMPTS: %w", err)
	}
	return nil
}

func (d *Dispatcher) publishDLQ(ctx context.Context, subject string, dl *toolwirev1.DeadLetter, seq uint64) error {
	data, err := proto.Marshal(dl)
	if err != nil {
		return err
	}
	// The advisory's stream sequence makes the record idempotent across
	// reaper retries within the duplicate window.
	_, err = d.bus.JS.Publish(ctx, subject, data, jetstream.WithMsgID(fmt.Sprintf("reap-%d", seq)))
	return err
}
