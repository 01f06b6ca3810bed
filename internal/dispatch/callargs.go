package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// callArgsSlack is how far before and after the time in a call's id (the
// admitting replica's clock) storedCall looks for the call in the calls
// stream (stored at the stream leader's time): clock skew between the two.
const callArgsSlack = time.Minute

// callScanInactive is how long the server keeps a call scan's consumer
// when the scan is gone without deleting it (a dispatcher that died).
const callScanInactive = 30 * time.Second

// callScanBatch is how many stored calls one fetch of a scan reads.
const callScanBatch = 256

// ErrCallNotStored is returned by CallArguments and ApplyIntents when no
// stored call of that id (and tool) in the tenant is found: never
// admitted, refused at admission, another tenant's, or past the calls
// stream's retention.
var ErrCallNotStored = errors.New("dispatch: no stored call")

// CallArguments returns the arguments, exactly as admitted, of call
// callID of tool in id's tenant (storedCall). It is how a store that
// keeps a call's arguments redacted (the MCP tasks bucket) gets them back
// to submit the call that continues it. A call the caller may not see
// (reaches) is not stored for it. Errors: ErrCallNotStored, and the
// stream's.
func (d *Dispatcher) CallArguments(ctx context.Context, id identity.Identity, tool, callID string) ([]byte, error) {
	call, err := d.storedCall(ctx, id.Tenant, tool, callID)
	if err != nil {
		return nil, err
	}
	if !id.MaySeeCall(id.Tenant, call.GetCaller().GetAgent(), d.cfg.AgentVisibility) {
		return nil, fmt.Errorf("%w: %s of tool %q", ErrCallNotStored, callID, tool)
	}
	return call.GetArguments(), nil
}

// storedCall returns call callID of tenant as a dispatcher stored it, of
// tool (empty = any tool): from the approvals bucket when the call was
// parked for approval (the record holds the call as approved and
// published), otherwise the first message published under the call's id
// on the calls stream, on the subjects of that tenant (and tool) only,
// read from the time in the call's id less callArgsSlack until the
// stream's messages are past that time plus callArgsSlack and half the
// duplicate window (how long an unconfirmed call is published again);
// with an archive store, a call older than the stream reaches is read
// from the archive the same way (archivedCall). Only dispatchers write
// either (workers may not publish calls nor write
// approvals), so what it returns is what the call was admitted as: its
// tool, spec version, caller and session. Errors: ErrCallNotStored, ctx's,
// and the stream's.
func (d *Dispatcher) storedCall(ctx context.Context, tenant, tool, callID string) (*toolwirev1.ToolCall, error) {
	call, _, err := d.storedCallFrom(ctx, tenant, tool, callID)
	return call, err
}

// storedCallFrom is storedCall, and whether the call was read from the
// calls stream (or its archive): stored there, so published. A call
// read from its approval record may be parked still, or refused at its
// publish after its approval.
func (d *Dispatcher) storedCallFrom(ctx context.Context, tenant, tool, callID string) (call *toolwirev1.ToolCall, fromStream bool, err error) {
	u, err := ulid.ParseStrict(callID)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %q is not a call id", ErrCallNotStored, callID)
	}
	rec, err := d.approvals.Record(ctx, tenant, callID)
	switch {
	case err == nil && rec.Call != nil && (tool == "" || rec.Call.GetTool() == tool):
		return rec.Call, false, nil
	case err != nil && !errors.Is(err, approvals.ErrNotFound):
		return nil, false, fmt.Errorf("dispatch: read approval %s: %w", callID, err)
	}
	q := callScan{tenant: tenant, tool: tool, callID: callID, at: ulid.Time(u.Time())}
	call, err = d.scanCalls(ctx, q)
	if err == nil && call == nil {
		call, err = d.archivedCall(ctx, q)
	}
	if err != nil {
		return nil, false, err
	}
	if call == nil {
		return nil, false, fmt.Errorf("%w: %s of tool %q", ErrCallNotStored, callID, tool)
	}
	return call, true, nil
}

// callScan is what scanCalls looks for: call callID of tenant and tool
// (empty = any), admitted at about at.
type callScan struct {
	tenant, tool, callID string
	at                   time.Time
}

// scanCalls reads the calls stream for q's call (storedCall): the call,
// or nil when the scan passed its window (or the stream's end) without
// it. A scan the cluster cannot serve now (bus.Unavailable: no
// responders, a stream or cluster without a leader, a request left
// unanswered, a connection reconnecting) is made again from the start,
// callScanRetryFirst apart and doubling to callScanRetryMax, until ctx
// ends or callScanRetryFor has passed: a stream electing a leader is
// answered after the election, not failed, and an error that never
// clears (a credential refused the consumer's create, which nats.go
// reports as a timeout) is returned to a caller with no deadline too.
// The error is then the last scan's.
func (d *Dispatcher) scanCalls(ctx context.Context, q callScan) (*toolwirev1.ToolCall, error) {
	wait, start := callScanRetryFirst, time.Now()
	for {
		call, err := d.scanCallsOnce(ctx, q)
		if err == nil || !bus.Unavailable(err) || ctx.Err() != nil {
			return call, err
		}
		if time.Since(start) >= callScanRetryFor {
			d.log.WarnContext(ctx, "the calls stream could not be read; giving up", "call_id", q.callID, "for", callScanRetryFor, "err", err)
			return nil, fmt.Errorf("dispatch: the calls stream could not be read for %s: %w", callScanRetryFor, err)
		}
		d.log.DebugContext(ctx, "the calls stream cannot be read now; reading again", "call_id", q.callID, "retry_in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		wait = min(2*wait, callScanRetryMax)
	}
}

// callScanRetryFirst and callScanRetryMax space scanCalls' retries;
// callScanRetryFor is how long it retries at most.
const (
	callScanRetryFirst = 100 * time.Millisecond
	callScanRetryMax   = 2 * time.Second
	callScanRetryFor   = 2 * time.Minute
)

// callScanRequest bounds each request of a scan (making its consumer,
// reading its info): one sent while the stream has no leader (or to a
// server that just died) may never be answered, and waited for the
// caller's whole context. A fetch needs no bound of its own: nats.go
// ends a FetchNoWait left unanswered after 1s.
const callScanRequest = 5 * time.Second

// scanCallsOnce is one scan of scanCalls, through one plain pull consumer
// (no acks, one replica, in memory) made under ctx and read with
// FetchNoWait until the call or the end of its window. Not an ordered
// consumer: nats.go's deletes and makes its server consumer again on
// every fetch, with a context of its own (up to 33s of retries that ctx
// does not end). The consumer is deleted when the scan returns, and
// removed by the server after callScanInactive if that fails (or if its
// making went unanswered).
func (d *Dispatcher) scanCallsOnce(ctx context.Context, q callScan) (*toolwirev1.ToolCall, error) {
	from, until := q.at.Add(-callArgsSlack), q.at.Add(callArgsSlack+d.bus.Config.DuplicateWindow/2)
	cctx, cancel := context.WithTimeout(ctx, callScanRequest)
	defer cancel()
	cons, err := d.bus.Calls.CreateConsumer(cctx, jetstream.ConsumerConfig{
		FilterSubjects: []string{d.subj.CallsOf(q.tenant, q.tool)},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy, OptStartTime: &from,
		AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: callScanInactive,
		Replicas: 1, MemoryStorage: true,
	})
	if err != nil {
		return nil, fmt.Errorf("dispatch: read calls: %w", err)
	}
	defer d.deleteCallScan(cons)
	emptyBefore := false
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("dispatch: read calls: %w", err)
		}
		batch, err := cons.FetchNoWait(callScanBatch)
		if err != nil {
			return nil, fmt.Errorf("dispatch: read calls: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			if md, err := m.Metadata(); err == nil && md.Timestamp.After(until) {
				return nil, nil // past the window: the rest of the batch is later still
			}
			if call := q.match(m.Headers().Get(jetstream.MsgIDHeader), m.Data()); call != nil {
				return call, nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, fmt.Errorf("dispatch: read calls: %w", err)
		}
		if n > 0 {
			emptyBefore = false
			continue
		}
		if ended, err := scanEnded(ctx, cons, emptyBefore); ended || err != nil {
			return nil, err
		}
		emptyBefore = true
	}
}

// scanEnded tells whether a scan whose fetch returned nothing is at its
// end: its consumer has no message left to deliver. A fetch nobody
// answered (the consumer's server died, or is slow) also returns
// nothing, with no error; so the end is confirmed with the consumer's
// info, and an info that fails is the scan's error (bus.Unavailable
// retries it). Messages left is a call stored since the fetch (read them:
// false, nil), or, after a second empty fetch in a row (emptyBefore), a
// consumer that does not deliver: an error bus.Unavailable retries.
func scanEnded(ctx context.Context, cons jetstream.Consumer, emptyBefore bool) (bool, error) {
	ictx, cancel := context.WithTimeout(ctx, callScanRequest)
	defer cancel()
	info, err := cons.Info(ictx)
	switch {
	case err != nil:
		return false, fmt.Errorf("dispatch: read calls: confirm the end: %w", err)
	case info.NumPending == 0:
		return true, nil
	case emptyBefore:
		return false, fmt.Errorf("dispatch: read calls: two fetches returned nothing with %d calls left: %w", info.NumPending, nats.ErrTimeout)
	}
	return false, nil
}

// match is the call a stored message with message id msgID and payload
// data is when it is q's call; nil for another call or a retry's
// re-entry (its message id is not the call's).
func (q callScan) match(msgID string, data []byte) *toolwirev1.ToolCall {
	if msgID != q.callID {
		return nil
	}
	var call toolwirev1.ToolCall
	if proto.Unmarshal(data, &call) == nil && call.GetCallId() == q.callID &&
		call.GetCaller().GetTenant() == q.tenant && (q.tool == "" || call.GetTool() == q.tool) {
		return &call
	}
	return nil
}

// deleteCallScan deletes a call scan's server consumer (which the server
// would keep until inactive).
func (d *Dispatcher) deleteCallScan(cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), watchCleanup)
	defer cancel()
	if err := d.bus.Calls.DeleteConsumer(ctx, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		d.log.Debug("call scan consumer not deleted; the server removes it when inactive", "consumer", info.Name, "err", err)
	}
}
