package audit

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/archive"
	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/bus"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// OutcomeRejected is the outcome of a call admission refused (Refusals).
const OutcomeRejected = "rejected"

// Refusals streams the calls admission refused that f selects — their
// REJECTED events, oldest first, up to the events stream's last sequence
// when the run starts — to emit as Records: Admission and Outcome
// "rejected", ErrorType the refusal's type, Response the refusal as
// answered, and Policy the decision when the policy refused (version,
// rule, reason). Refused calls never reach the calls stream, so Run does
// not see them. Without an archive they live as long as the events
// stream keeps them; with one (UseArchive) the archived events before the
// stream's first sequence are read first, then the stream, as one
// sequence (no event twice; what the stream drops while the run reads is
// read from the archive), as Run reads calls. A rejection is checked as
// a dispatcher's (internal/believed) whether read live or archived. The
// refusal quotes no secret argument (the dispatcher redacts it before
// recording it) and carries no arguments. It reads with a bus.Scan, as
// Run does; f.Outcome may narrow to one error type name.
func (s *Source) Refusals(ctx context.Context, f Filter, o Options, emit func(*Record) error) (*Summary, error) {
	if f.Tenant != "" && !bus.ValidTenant(f.Tenant) {
		return nil, fmt.Errorf("audit: tenant filter %q does not match %s", f.Tenant, bus.TenantPattern)
	}
	sum := &Summary{Outcomes: map[string]int{}}
	info, err := s.events.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit: events stream: %w", err)
	}
	rs := &refusalScan{s: s, f: f, sum: sum, emit: emit, last: info.State.LastSeq}
	if rs.last == 0 {
		return sum, nil
	}
	if info.State.FirstSeq > 1 {
		done, err := rs.archived(ctx, info.State.FirstSeq-1)
		if err != nil || done {
			return sum, err
		}
	}
	if info.State.Msgs == 0 || rs.covered >= rs.last {
		endGap(sum, "EVENTS", rs.prev, rs.last)
		return sum, nil
	}
	return sum, rs.live(ctx, o)
}

// refusalScan is one Refusals run's read of the events: the archived
// part (the sequences before the live stream's first), then the live
// stream, as one sequence.
type refusalScan struct {
	s    *Source
	f    Filter
	sum  *Summary
	emit func(*Record) error
	// last is the events stream's last sequence when the run started;
	// covered the sequence up to which every event has been read, from
	// the archive or live; prev the last sequence read (gaps are found
	// against it).
	last, covered, prev uint64
}

// archived reads the archived events after covered up to sequence to
// (as far as the archive holds them) and reports whether the run is done
// (past Until). Without an archive it does nothing.
func (rs *refusalScan) archived(ctx context.Context, to uint64) (bool, error) {
	if rs.s.arch == nil || to <= rs.covered {
		return false, nil
	}
	all := rs.s.subj.AllEvents()
	covered, done, err := rs.s.eachArchived(ctx, rs.s.events.CachedInfo().Config.Name, rs.covered, to, rs.f,
		func(m *archive.Message) (bool, error) {
			if !bus.SubjectMatches(all, m.Subject) {
				return false, nil
			}
			return rs.visit(ctx, eventMsg{seq: m.Seq, stored: m.Time, h: m.Header, data: m.Data})
		})
	if err != nil || done || covered == rs.covered {
		return done, err
	}
	to = covered
	rs.covered = covered
	// Every sequence up to to is read or passed over by the filter: the
	// next one read should be to+1, or sequences are missing (the
	// archive stops short of the stream's first). With Since and nothing
	// read yet, the live read starts by time, wherever that is.
	if rs.prev != 0 || rs.f.Since.IsZero() {
		rs.prev = max(rs.prev, to)
	}
	// Archived events past Until are not handed over (q.Until), and the
	// run is not done here: the archive's part read ends at to, and the
	// events after it (live, or archived later) up to Until are still to
	// be read; the live read stops at the first event past Until (visit).
	return false, nil
}

// live reads the events stream after what the archive gave, to its end
// (or the first event past Until: visit).
func (rs *refusalScan) live(ctx context.Context, o Options) error {
	l := &liveRead{stream: rs.s.events, what: "events", filters: []string{rs.s.subj.AllEvents()}, since: rs.f.Since, covered: &rs.covered,
		visit: func(ctx context.Context, msg jetstream.Msg, md *jetstream.MsgMetadata) (bool, error) {
			return rs.visit(ctx, eventMsg{seq: md.Sequence.Stream, stored: md.Timestamp, h: msg.Headers(), data: msg.Data()})
		}}
	if rs.s.arch != nil {
		l.archived = rs.archived
	}
	if o.Progress != nil {
		l.progress = func() { o.Progress(rs.sum.Scanned) }
	}
	return l.run(ctx)
}

// refusalCheck bounds the enrolment lookup of one rejection's check.
const refusalCheck = 10 * time.Second

// eventMsg is one events-stream message, read live or from the archive.
type eventMsg struct {
	seq    uint64
	stored time.Time
	h      nats.Header
	data   []byte
}

// visit handles one event, archived or live, and reports whether the run
// is done (at the snapshot's end or past Until).
func (rs *refusalScan) visit(ctx context.Context, m eventMsg) (bool, error) {
	f, sum := rs.f, rs.sum
	seq, stored := m.seq, m.stored
	if seq <= rs.covered {
		return false, nil // read already, from the archive
	}
	if seq > rs.last || (!f.Until.IsZero() && stored.After(f.Until)) {
		return true, nil
	}
	rs.covered = seq
	sum.Scanned++
	if sum.FirstSeq == 0 {
		sum.FirstSeq = seq
	}
	sum.LastSeq = seq
	// The events stream holds events only: its sequences are contiguous,
	// and one missing between two read (archived and live, or the
	// archive's own) is a gap, as Run reports.
	if rs.prev != 0 && seq != rs.prev+1 {
		sum.addAnomaly(Anomaly{Kind: "gap", Seq: rs.prev + 1,
			Detail: fmt.Sprintf("EVENTS sequences %d-%d are missing (deleted messages, or dropped unarchived)", rs.prev+1, seq-1)})
	}
	rs.prev = seq
	done := seq == rs.last
	rec := refusalRecord(m.data, seq, stored, f)
	if rec == nil {
		return done, nil
	}
	// Only a dispatcher refuses calls: a rejection anyone else signed
	// is no refusal of the record (internal/believed).
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refusalCheck)
	_, _, cerr := believed.CheckEvent(cctx, rs.s.keys, rec.CallID, "", m.h, m.data)
	cancel()
	if cerr != nil {
		sum.addAnomaly(Anomaly{Kind: "unbelieved_result", CallID: rec.CallID, Seq: seq, Detail: "a rejection not signed by a dispatcher: " + cerr.Error()})
		return done, nil
	}
	return done, rs.s.account(sum, rec, f, rs.emit)
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
