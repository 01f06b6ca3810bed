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
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// callArgsSlack is how far before the time in a call's id (the admitting
// replica's clock) CallArguments looks for the call in the calls stream
// (stored at the stream leader's time): clock skew between the two.
const callArgsSlack = time.Minute

// ErrCallNotStored is returned by CallArguments when no stored call of
// that id, tool and tenant is found (never admitted, another tenant's, or
// past the calls stream's retention).
var ErrCallNotStored = errors.New("dispatch: no stored call")

// CallArguments returns the arguments, exactly as admitted, of call
// callID of tool in id's tenant: from the approvals bucket when the call
// was parked for approval, otherwise from the calls stream, read from the
// time in the call's id (less callArgsSlack) to the call, on the subjects
// of that tenant and tool only. It is how a store that keeps a call's
// arguments redacted (the MCP tasks bucket) gets them back to submit the
// call that continues it. Errors: ErrCallNotStored, and the stream's.
func (d *Dispatcher) CallArguments(ctx context.Context, id identity.Identity, tool, callID string) ([]byte, error) {
	u, err := ulid.ParseStrict(callID)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not a call id", ErrCallNotStored, callID)
	}
	rec, err := d.approvals.Record(ctx, id.Tenant, callID)
	switch {
	case err == nil && rec.Call != nil && rec.Call.GetTool() == tool:
		return rec.Call.GetArguments(), nil
	case err != nil && !errors.Is(err, approvals.ErrNotFound):
		return nil, fmt.Errorf("dispatch: read approval %s: %w", callID, err)
	}
	from := ulid.Time(u.Time()).Add(-callArgsSlack)
	cons, err := d.bus.Calls.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{d.subj.CallsOf(id.Tenant, tool)},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy, OptStartTime: &from,
	})
	if err != nil {
		return nil, fmt.Errorf("dispatch: read calls: %w", err)
	}
	for {
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			return nil, fmt.Errorf("dispatch: read calls: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			if m.Headers().Get(jetstream.MsgIDHeader) != callID {
				continue // another call, or a retry's re-entry
			}
			var call toolwirev1.ToolCall
			if proto.Unmarshal(m.Data(), &call) == nil && call.GetCallId() == callID &&
				call.GetCaller().GetTenant() == id.Tenant && call.GetTool() == tool {
				return call.GetArguments(), nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, fmt.Errorf("dispatch: read calls: %w", err)
		}
		if n == 0 {
			return nil, fmt.Errorf("%w: %s of tool %q", ErrCallNotStored, callID, tool)
		}
	}
}
