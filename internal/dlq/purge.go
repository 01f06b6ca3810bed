package dlq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ErrNotPurgeable is returned by Purge for a dead letter that may not be
// purged: it holds no decodable call, or its call's record is not where
// the caller said in the calls stream (the letter may be the last record
// of its call, and is kept).
var ErrNotPurgeable = errors.New("dlq: the dead letter cannot be purged")

// PurgeRequest names the dead letter Purge removes: its sequence, the sequence
// of its call's record in the calls stream (which Purge checks holds that
// call), and who asked ("acme/ops (dashboard)"; "" names no one).
type PurgeRequest struct {
	Seq, CallSeq uint64
	By           string
}

// Purge removes the dead letter p.Seq from the DLQ, erasing its bytes
// (a letter holds its call's secret arguments in clear), once the call's
// own record is confirmed in the calls stream at p.CallSeq: the call,
// its events and its result are never touched (the calls stream denies
// deletes), so the audit and replay keep the call; only the letter, and
// with it a retry from the DLQ, is gone. Before the letter is removed it
// records a DEAD_LETTER_PURGED event on the call's events subject, signed
// as the dispatcher's (SignWith), naming who asked and the sequence: no
// letter is removed without that record. It returns the letter removed.
//
// Errors: ErrNotFound for no letter at p.Seq; ErrNotPurgeable for a
// letter without a decodable call or whose call's record is not at
// p.CallSeq; else the server's (the letter is then kept, or, when only
// the removal failed, kept with its record written).
func (q *Queue) Purge(ctx context.Context, p PurgeRequest) (*Letter, error) {
	l, err := q.Get(ctx, p.Seq)
	if err != nil {
		return nil, err
	}
	call := l.Record.GetCall()
	if call == nil {
		return nil, fmt.Errorf("%w: letter %d holds no decodable call: it is the only record of what it held", ErrNotPurgeable, p.Seq)
	}
	if err := q.callRecorded(ctx, call, p.CallSeq); err != nil {
		return nil, err
	}
	ev := &toolwirev1.CallEvent{CallId: call.CallId, Tool: call.Tool, Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_DEAD_LETTER_PURGED,
		Time: timestamppb.New(time.Now()), Caller: call.Caller, SpecVersion: call.SpecVersion,
		Message: fmt.Sprintf("dead letter %d purged from the DLQ", p.Seq)}
	if p.By != "" {
		ev.Message += " by " + p.By
	}
	data, err := proto.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("dlq: encode the purge record: %w", err)
	}
	msg := &nats.Msg{Subject: q.subj.Event(call.GetCaller().GetTenant(), call.Dispatcher, call.CallId), Data: data}
	if q.signer != nil {
		msg = q.signer.SignedMsg(msg.Subject, signing.KindEvent, call.CallId, 0, data, nil)
	}
	if _, err := q.js.PublishMsg(ctx, msg); err != nil {
		return nil, fmt.Errorf("dlq: record the purge of letter %d: %w (the letter is kept)", p.Seq, err)
	}
	if err := q.dlq.SecureDeleteMsg(ctx, p.Seq); err != nil {
		return nil, fmt.Errorf("dlq: remove letter %d: %w", p.Seq, err)
	}
	return l, nil
}

// callRecorded checks that the calls stream holds call at seq.
func (q *Queue) callRecorded(ctx context.Context, call *toolwirev1.ToolCall, seq uint64) error {
	if seq == 0 {
		return fmt.Errorf("%w: no record of call %s is known in the calls stream: the letter is kept", ErrNotPurgeable, call.CallId)
	}
	m, err := q.calls.GetMsg(ctx, seq)
	if err != nil {
		return fmt.Errorf("%w: the record of call %s is not in the calls stream (%w): the letter is kept", ErrNotPurgeable, call.CallId, err)
	}
	stored := &toolwirev1.ToolCall{}
	if proto.Unmarshal(m.Data, stored) != nil || stored.CallId != call.CallId {
		return fmt.Errorf("%w: the calls stream holds another record at %d than call %s: the letter is kept", ErrNotPurgeable, seq, call.CallId)
	}
	return nil
}
