package dlq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ErrNotPurgeable is returned by Purge for a dead letter that may not be
// purged: it holds no decodable call; its call's record is not where the
// caller said in the calls stream, or names another tenant or tool than
// the letter; or the call has no believed result stored yet. The letter
// may then be the last record of its call (why it died), and is kept.
var ErrNotPurgeable = errors.New("dlq: the dead letter cannot be purged")

// PurgeRequest names the dead letter Purge removes: its sequence, the sequence
// of its call's record in the calls stream (which Purge checks holds that
// call), who asked ("acme/ops (dashboard)"; "" names no one), and the
// keyring that decides whose results are believed (nil: none is, and
// nothing is purged).
type PurgeRequest struct {
	Seq, CallSeq uint64
	By           string
	Keys         *signing.Keyring
}

// Purge removes the dead letter p.Seq from the DLQ, overwriting the
// letter's bytes (SecureDeleteMsg: the letter holds its call's secret
// arguments in clear), once the call's own record is confirmed: the
// calls stream holds the call at p.CallSeq, of the letter's tenant and
// tool, and the results stream a believed result of it. Only the
// letter's copy is removed: the call's message in the calls stream
// still holds its arguments, secret ones included (the calls stream
// denies deletes; the audit redacts on read), as does a replicated
// stream's raft log until it is compacted; its events and its result
// are never touched. With the letter, a retry from the DLQ is gone.
//
// Before the letter is removed it records a DEAD_LETTER_PURGED event on
// the call's events subject, signed as the dispatcher's (SignWith),
// built from the stored call (what the dispatcher wrote, never the
// letter's worker-written copy), naming who asked and the sequence, with
// the message id purge-<seq> so that a repeated or concurrent purge of
// the letter records it once: no letter is removed without that record.
// A removal that finds the letter gone counts as done (another purge
// removed it). It returns the letter removed.
//
// Errors: ErrNotFound for no letter at p.Seq; ErrNotPurgeable as above;
// else the server's (the letter is then kept, or, when only the removal
// failed, kept with its record written).
func (q *Queue) Purge(ctx context.Context, p PurgeRequest) (*Letter, error) {
	l, err := q.Get(ctx, p.Seq)
	if err != nil {
		return nil, err
	}
	call := l.Record.GetCall()
	if call == nil {
		return nil, fmt.Errorf("%w: letter %d holds no decodable call: it is the only record of what it held", ErrNotPurgeable, p.Seq)
	}
	stored, err := q.callRecorded(ctx, call, p.CallSeq)
	if err != nil {
		return nil, err
	}
	if err := q.resultStored(ctx, stored, p.Keys); err != nil {
		return nil, err
	}
	if err := q.recordPurge(ctx, stored, p); err != nil {
		return nil, err
	}
	if err := q.remove(ctx, p.Seq); err != nil {
		return nil, err
	}
	return l, nil
}

// recordPurge publishes the DEAD_LETTER_PURGED event of the letter p.Seq
// of the stored call, once (message id purge-<seq>).
func (q *Queue) recordPurge(ctx context.Context, stored *toolwirev1.ToolCall, p PurgeRequest) error {
	ev := &toolwirev1.CallEvent{CallId: stored.CallId, Tool: stored.Tool, Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_DEAD_LETTER_PURGED,
		Time: timestamppb.New(time.Now()), Caller: stored.Caller, SpecVersion: stored.SpecVersion,
		Message: fmt.Sprintf("dead letter %d purged from the DLQ", p.Seq)}
	if p.By != "" {
		ev.Message += " by " + p.By
	}
	data, err := proto.Marshal(ev)
	if err != nil {
		return fmt.Errorf("dlq: encode the purge record: %w", err)
	}
	msg := &nats.Msg{Subject: q.subj.Event(stored.GetCaller().GetTenant(), stored.Dispatcher, stored.CallId), Data: data}
	if q.signer != nil {
		msg = q.signer.SignedMsg(msg.Subject, signing.KindEvent, stored.CallId, 0, data, nil)
	}
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	msg.Header.Set(nats.MsgIdHdr, PurgeMsgID(p.Seq))
	if _, err := q.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("dlq: record the purge of letter %d: %w (the letter is kept)", p.Seq, err)
	}
	return nil
}

// PurgeMsgID is the message id of the purge record of the letter seq:
// the events stream stores it once within its duplicate window.
func PurgeMsgID(seq uint64) string { return fmt.Sprintf("purge-%d", seq) }

// remove overwrites and removes the letter seq; a letter already gone
// (removed by another purge) counts as removed.
func (q *Queue) remove(ctx context.Context, seq uint64) error {
	err := q.dlq.SecureDeleteMsg(ctx, seq)
	if err == nil {
		return nil
	}
	if _, gerr := q.Get(ctx, seq); errors.Is(gerr, ErrNotFound) {
		return nil
	}
	return fmt.Errorf("dlq: remove letter %d: %w", seq, err)
}

// callRecorded returns the call the calls stream holds at seq, once it
// is the letter's call, of its tenant and tool.
func (q *Queue) callRecorded(ctx context.Context, call *toolwirev1.ToolCall, seq uint64) (*toolwirev1.ToolCall, error) {
	if seq == 0 {
		return nil, fmt.Errorf("%w: no record of call %s is known in the calls stream: the letter is kept", ErrNotPurgeable, call.CallId)
	}
	m, err := q.calls.GetMsg(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("%w: the record of call %s is not in the calls stream (%w): the letter is kept", ErrNotPurgeable, call.CallId, err)
	}
	stored := &toolwirev1.ToolCall{}
	if proto.Unmarshal(m.Data, stored) != nil || stored.CallId != call.CallId {
		return nil, fmt.Errorf("%w: the calls stream holds another record at %d than call %s: the letter is kept", ErrNotPurgeable, seq, call.CallId)
	}
	if stored.GetCaller().GetTenant() != call.GetCaller().GetTenant() || stored.Tool != call.Tool {
		return nil, fmt.Errorf("%w: the letter names another tenant or tool than the calls stream's record of call %s: the letter is kept", ErrNotPurgeable, call.CallId)
	}
	return stored, nil
}

// resultStored checks that a believed result of the stored call is in
// the results stream: until it is, the letter may be the only record of
// why the call died.
func (q *Queue) resultStored(ctx context.Context, stored *toolwirev1.ToolCall, keys *signing.Keyring) error {
	if keys == nil || q.results == nil {
		return fmt.Errorf("%w: no keyring to believe call %s's result with: the letter is kept", ErrNotPurgeable, stored.CallId)
	}
	r := believed.Reader{JS: q.js, Stream: q.results, Keys: keys}
	found, err := r.Read(ctx, q.subj.ResultAnyDispatcher(stored.GetCaller().GetTenant(), stored.CallId), stored.Tool)
	if err != nil {
		return fmt.Errorf("dlq: read call %s's result: %w (the letter is kept)", stored.CallId, err)
	}
	if found == nil {
		return fmt.Errorf("%w: call %s's result is not stored yet: the letter may be its only record of why it died, and is kept", ErrNotPurgeable, stored.CallId)
	}
	return nil
}
