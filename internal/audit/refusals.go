package audit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/bus"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// OutcomeRejected is the outcome of a call admission refused (Refusals).
const OutcomeRejected = "rejected"

// Refusals streams the calls admission refused that f selects — their
// REJECTED events in the events stream, oldest first, up to its last
// sequence when the run starts — to emit as Records: Admission and
// Outcome "rejected", ErrorType the refusal's type, Response the refusal
// as answered, and Policy the decision when the policy refused (version,
// rule, reason). Refused calls never reach the calls stream, so Run does
// not see them; they live as long as the events stream keeps them. The
// refusal quotes no secret argument (the dispatcher redacts it before
// recording it) and carries no arguments. It reads with a bus.Scan, as Run
// does; f.Outcome may narrow to one error type name.
func (s *Source) Refusals(ctx context.Context, f Filter, o Options, emit func(*Record) error) (*Summary, error) {
	if f.Tenant != "" && !bus.ValidTenant(f.Tenant) {
		return nil, fmt.Errorf("audit: tenant filter %q does not match %s", f.Tenant, bus.TenantPattern)
	}
	sum := &Summary{Outcomes: map[string]int{}}
	info, err := s.events.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit: events stream: %w", err)
	}
	last := info.State.LastSeq
	if last == 0 || info.State.Msgs == 0 {
		return sum, nil
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{s.subj.AllEvents()}}
	if !f.Since.IsZero() {
		t := f.Since
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &t
	}
	cons, err := bus.NewScan(ctx, s.events, cfg)
	if err != nil {
		return nil, fmt.Errorf("audit: read events: %w", err)
	}
	defer func() { _ = cons.Close() }()
	empties := 0
	for {
		batch, err := cons.Fetch(256, jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			return sum, fmt.Errorf("audit: read events: %w", err)
		}
		n, done, err := s.refusalBatch(batch, f, sum, last, emit)
		if err != nil || done {
			return sum, err
		}
		if o.Progress != nil {
			o.Progress(sum.Scanned)
		}
		if n > 0 {
			empties = 0
			continue
		}
		ci, err := cons.Info(ctx)
		if err != nil {
			return sum, fmt.Errorf("audit: read events: %w", err)
		}
		if ci.NumPending == 0 {
			return sum, nil
		}
		if empties++; empties > 60 {
			return sum, fmt.Errorf("audit: read events: no progress for 30s with %d messages pending", ci.NumPending)
		}
	}
}

// refusalCheck bounds the enrolment lookup of one rejection's check.
const refusalCheck = 10 * time.Second

// refusalBatch handles one fetch of Refusals; it always drains the batch.
func (s *Source) refusalBatch(batch jetstream.MessageBatch, f Filter, sum *Summary, last uint64,
	emit func(*Record) error) (n int, done bool, err error) {
	for msg := range batch.Messages() {
		n++
		if done || err != nil {
			continue
		}
		md, merr := msg.Metadata()
		if merr != nil {
			err = fmt.Errorf("audit: read events: %w", merr)
			continue
		}
		seq := md.Sequence.Stream
		if seq > last || (!f.Until.IsZero() && md.Timestamp.After(f.Until)) {
			done = true
			continue
		}
		if seq == last {
			done = true
		}
		sum.Scanned++
		if sum.FirstSeq == 0 {
			sum.FirstSeq = seq
		}
		sum.LastSeq = seq
		rec := refusalRecord(msg.Data(), seq, md.Timestamp, f)
		if rec == nil {
			continue
		}
		// Only a dispatcher refuses calls: a rejection anyone else signed
		// is no refusal of the record (internal/believed).
		ctx, cancel := context.WithTimeout(context.Background(), refusalCheck)
		_, _, cerr := believed.CheckEvent(ctx, s.keys, rec.CallID, "", msg.Headers(), msg.Data())
		cancel()
		if cerr != nil {
			sum.addAnomaly(Anomaly{Kind: "unbelieved_result", CallID: rec.CallID, Seq: seq, Detail: "a rejection not signed by a dispatcher: " + cerr.Error()})
			continue
		}
		err = s.account(sum, rec, f, emit)
	}
	if berr := batch.Error(); berr != nil && !errors.Is(berr, nats.ErrTimeout) && err == nil {
		err = fmt.Errorf("audit: read events: %w", berr)
	}
	return n, done, err
}

// refusalRecord is the Record of a REJECTED event that f selects, nil for
// any other event.
func refusalRecord(data []byte, seq uint64, stored time.Time, f Filter) *Record {
	ev := &toolwirev1.CallEvent{}
	if proto.Unmarshal(data, ev) != nil || ev.Type != toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED {
		return nil
	}
	c := ev.GetCaller()
	if (f.Tenant != "" && c.GetTenant() != f.Tenant) || (f.Tool != "" && ev.Tool != f.Tool) ||
		(f.CallID != "" && ev.CallId != f.CallID) || (f.Session != "" && c.GetSession() != f.Session) ||
		(f.Agent != "" && c.GetAgent() != f.Agent) {
		return nil
	}
	rec := &Record{CallID: ev.CallId, Seq: seq, Time: stored, Tenant: c.GetTenant(), Agent: c.GetAgent(),
		Session: c.GetSession(), User: c.GetUser(), Run: c.GetRun(), Tool: ev.Tool, Admission: OutcomeRejected,
		Outcome: OutcomeRejected, ErrorType: strings.TrimPrefix(ev.GetError().GetType().String(), "ERROR_TYPE_"),
		Policy: policyOfDecision(ev.Policy)}
	resp := &toolwirev1.ToolResponse{CallId: ev.CallId, Tool: ev.Tool, Error: ev.Error}
	if b, err := protojson.Marshal(resp); err == nil {
		rec.Response = b
	}
	return rec
}
