package callindex

import (
	"context"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/toolwire/toolwire/internal/believed"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// rejectedType is CallEvent.type of a refusal.
const rejectedType = uint64(toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED)

// callEventTypeField is CallEvent.type's field number.
const callEventTypeField = 2

// isRejection reports whether data, a CallEvent, is a REJECTED one,
// reading its type field only (most events are not: they are skipped
// without being decoded).
func isRejection(data []byte) bool {
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return false
		}
		data = data[n:]
		if num == callEventTypeField && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(data)
			return n > 0 && v == rejectedType
		}
		n = protowire.ConsumeFieldValue(num, typ, data)
		if n < 0 {
			return false
		}
		data = data[n:]
	}
	return false
}

// onEvent indexes an EVENTS message that is a believed REJECTED event
// (a call admission refused) in the refusals ring, and hands it to live
// subscribers.
func (f *feeder) onEvent(_ context.Context, m jetstream.Msg, md *jetstream.MsgMetadata) {
	if md.Sequence.Stream > f.x.eventsSeq.Load() {
		f.x.eventsSeq.Store(md.Sequence.Stream) // the one writer
	}
	if !isRejection(m.Data()) {
		return
	}
	subject := m.Subject()
	callID := subject[strings.LastIndexByte(subject, '.')+1:]
	id, err := ulid.ParseStrict(callID)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	ev, _, err := believed.CheckEvent(ctx, f.streams.Keys, callID, "", m.Headers(), m.Data())
	cancel()
	if err != nil {
		// Only a dispatcher refuses calls (internal/believed).
		f.log.Warn("calls index: a rejection not signed by a dispatcher is no refusal", "subject", subject, "err", err)
		return
	}
	if ev.GetType() != toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED {
		return
	}
	// A refused call's names are whatever its caller sent: each is cut
	// (cutReason), so that the ring's memory stays bounded by its size.
	c := ev.GetCaller()
	e := Entry{ID: callID, Seq: md.Sequence.Stream, Time: md.Timestamp, Tenant: cutReason(c.GetTenant()), Agent: cutReason(c.GetAgent()),
		Session: cutReason(c.GetSession()), Tool: cutReason(ev.Tool), Outcome: ocName(ocRejected),
		ErrorType: strings.TrimPrefix(ev.GetError().GetType().String(), "ERROR_TYPE_"), Reason: cutReason(ev.GetError().GetMessage())}
	// The search text: the reason, and the policy rule that refused.
	text := ev.GetError().GetMessage()
	if p := ev.GetPolicy(); p.GetRuleId() != "" {
		text = p.GetRuleId() + " " + text
	}
	if !f.x.refused.add(e, []byte(text), nil, false) || !f.live || !f.x.hasSubscribers() {
		return
	}
	if e, ok := f.x.refused.get(&id); ok {
		f.x.publish(e)
	}
}

// ocName is the outcome name of a code.
func ocName(oc uint8) string { return outcomeNames[oc] }

// rebuildRefusals reads EVENTS up to its last sequence for the REJECTED
// events (refusalsFrom). It returns the last sequence read up to (0
// without an EVENTS stream).
func (f *feeder) rebuildRefusals(ctx context.Context) (uint64, error) {
	if f.streams.Events == nil {
		return 0, nil
	}
	info, err := f.streams.Events.Info(ctx)
	if err != nil {
		return 0, err
	}
	last := info.State.LastSeq
	cfg := f.refusalsFrom(max(info.State.FirstSeq, 1))
	if (cfg.DeliverPolicy == jetstream.DeliverByStartSequencePolicy && last < cfg.OptStartSeq) || info.State.Msgs == 0 {
		return last, nil
	}
	if err := f.read(ctx, span{stream: f.streams.Events, cfg: cfg, last: last, want: 1, handle: f.onEvent}); err != nil {
		return 0, err
	}
	if last > f.x.eventsSeq.Load() {
		f.x.eventsSeq.Store(last)
	}
	return last, nil
}

// refusalsFrom is where the rebuild reads EVENTS from (first its first
// sequence): a run again resumes after the last event the feed read; a
// first run starts at the oldest indexed call's time less TimeSlack, or
// at the stream's start when no call is indexed.
func (f *feeder) refusalsFrom(first uint64) jetstream.OrderedConsumerConfig {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{f.streams.Subjects.AllEvents()},
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: first}
	if s := f.x.eventsSeq.Load(); s >= first { // run again: resume
		cfg.OptStartSeq = s + 1
		return cfg
	}
	f.x.mu.RLock()
	defer f.x.mu.RUnlock()
	if f.x.n > 0 {
		t := time.Unix(0, f.x.unix[f.x.slot(0)]).Add(-TimeSlack)
		cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, 0, &t
	}
	return cfg
}

// Cursor is where a page of List starts: below Calls in the admitted
// calls (a CALLS sequence) and below Refused in the refused ones (an
// EVENTS sequence); 0 is the newest, 1 past the oldest (none left).
type Cursor struct{ Calls, Refused uint64 }

// IsZero reports whether c is the first page's cursor (or no next page).
func (c Cursor) IsZero() bool { return c == Cursor{} }

// exhausted is a cursor below every sequence.
const exhausted = 1

// List is Query over the admitted and the refused calls together, newest
// (stored time) first, from cursor c (q.Before is not read): Outcome
// OutcomeRejected selects refused calls only, any other outcome admitted
// calls only. It returns the page, the next page's cursor (zero when there
// is none) and how many calls match at or below the cursor (the two
// counts added: each counted up to MatchedCap).
func (x *Index) List(q Query, c Cursor) (page []Entry, next Cursor, matched int) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultQueryLimit
	}
	limit = min(limit, MaxQueryLimit)
	q.Limit = limit
	var calls, refused []Entry
	var nc, nr uint64
	var mc, mr int
	if q.Outcome != ocName(ocRejected) && c.Calls != exhausted {
		q.Before = c.Calls
		calls, nc, mc = x.Query(q)
	}
	if x.refused != nil && (q.Outcome == "" || q.Outcome == ocName(ocRejected)) && c.Refused != exhausted {
		q.Before = c.Refused
		refused, nr, mr = x.refused.Query(q)
		refused = x.notAdmitted(refused)
	}
	i, j := 0, 0
	for len(page) < limit && (i < len(calls) || j < len(refused)) {
		if j == len(refused) || (i < len(calls) && !calls[i].Time.Before(refused[j].Time)) {
			page, i = append(page, calls[i]), i+1
		} else {
			page, j = append(page, refused[j]), j+1
		}
	}
	next = Cursor{Calls: rest(calls, i, nc), Refused: rest(refused, j, nr)}
	if next == (Cursor{Calls: exhausted, Refused: exhausted}) {
		next = Cursor{}
	}
	return page, next, mc + mr
}

// notAdmitted is page (refused calls) less the calls this ring (the
// admitted calls) holds: a call refused OVERLOADED after a publish that
// may have reached the stream can be both, and is listed once, admitted.
func (x *Index) notAdmitted(page []Entry) []Entry {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := page[:0]
	for _, e := range page {
		u, err := ulid.ParseStrict(e.ID)
		if err == nil && x.ids.find((*[16]byte)(&u), x.id) >= 0 {
			continue
		}
		out = append(out, e)
	}
	return out
}

// rest is the cursor of what is left of one source's page (its first
// taken entries taken) whose own next cursor was next.
func rest(page []Entry, taken int, next uint64) uint64 {
	switch {
	case taken < len(page):
		return page[taken].Seq + 1 // from the first not taken
	case next != 0:
		return next
	default:
		return exhausted
	}
}
