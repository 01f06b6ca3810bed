package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	u, err := ulid.ParseStrict(callID)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not a call id", ErrCallNotStored, callID)
	}
	rec, err := d.approvals.Record(ctx, tenant, callID)
	switch {
	case err == nil && rec.Call != nil && (tool == "" || rec.Call.GetTool() == tool):
		return rec.Call, nil
	case err != nil && !errors.Is(err, approvals.ErrNotFound):
		return nil, fmt.Errorf("dispatch: read approval %s: %w", callID, err)
	}
	q := callScan{tenant: tenant, tool: tool, callID: callID, at: ulid.Time(u.Time())}
	call, err := d.scanCalls(ctx, q)
	if err == nil && call == nil {
		call, err = d.archivedCall(ctx, q)
	}
	if err != nil {
		return nil, err
	}
	if call == nil {
		return nil, fmt.Errorf("%w: %s of tool %q", ErrCallNotStored, callID, tool)
	}
	return call, nil
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
// ends: a stream electing a leader is answered after the election, not
// failed (the error is then the last scan's).
func (d *Dispatcher) scanCalls(ctx context.Context, q callScan) (*toolwirev1.ToolCall, error) {
	wait := callScanRetryFirst
	for {
		call, err := d.scanCallsOnce(ctx, q)
		if err == nil || !bus.Unavailable(err) || ctx.Err() != nil {
			return call, err
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

// callScanRetryFirst and callScanRetryMax space scanCalls' retries.
const (
	callScanRetryFirst = 100 * time.Millisecond
	callScanRetryMax   = 2 * time.Second
)

// callScanCreate bounds the request that makes a scan's consumer: one
// sent while the stream has no leader (or to a server that just died) may
// never be answered, and waited for the caller's whole context.
const callScanCreate = 5 * time.Second

// scanCallsOnce is one scan of scanCalls. Its ordered consumer is deleted
// when it returns, and removed by the server after callScanInactive if
// that fails (or if its making went unanswered).
func (d *Dispatcher) scanCallsOnce(ctx context.Context, q callScan) (*toolwirev1.ToolCall, error) {
	from, until := q.at.Add(-callArgsSlack), q.at.Add(callArgsSlack+d.bus.Config.DuplicateWindow/2)
	cctx, cancel := context.WithTimeout(ctx, callScanCreate)
	defer cancel()
	cons, err := d.bus.Calls.OrderedConsumer(cctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{d.subj.CallsOf(q.tenant, q.tool)},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy, OptStartTime: &from,
		InactiveThreshold: callScanInactive, MaxResetAttempts: 3,
	})
	if err != nil {
		return nil, fmt.Errorf("dispatch: read calls: %w", err)
	}
	defer d.deleteCallScan(cons)
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
		if n == 0 {
			return nil, nil
		}
	}
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

// deleteCallScan deletes a call scan's current server consumer (an
// ordered consumer leaves it there until inactive).
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
