package maintenance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/signing"
	"github.com/toolwire/toolwire/internal/startstop"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// OverdueSweeper answers accepted calls whose result is overdue: no result
// stored by the call's schedule-to-close deadline plus a grace period
// (OverdueSettings.Grace), or, for a call without a deadline, within
// OverdueSettings.NoDeadline of its admission, whatever happened to its
// messages (doc.go, "Overdue sweeper"). It follows the admission records
// (ACCEPTED events) and the stored results with two ordered consumers,
// keeps the calls without a result in a bounded min-heap by due time, and
// looks at each when it is due. Every replica runs one; the dead letter's
// message id and the result fence make that harmless.
type OverdueSweeper struct {
	cfg      OverdueConfig
	track    *tracker
	answered atomic.Uint64
	svc      *startstop.Loop
}

var _ startstop.Service = (*OverdueSweeper)(nil)

// OverdueStats counts what an overdue sweeper did.
type OverdueStats struct {
	// Tracked is how many calls it follows now.
	Tracked int
	// Dropped is how many admission records it dropped because it
	// followed MaxTracked calls already.
	Dropped uint64
	// Answered is how many overdue calls it answered.
	Answered uint64
}

// NewOverdueSweeper returns an overdue sweeper with cfg; Start starts it.
func NewOverdueSweeper(cfg OverdueConfig) *OverdueSweeper {
	s := &OverdueSweeper{cfg: cfg.WithDefaults()}
	s.track = newTracker(s.cfg.MaxTracked)
	s.svc = startstop.NewLoop(s.run)
	return s
}

// Start starts the sweeping goroutine, which follows the streams (trying
// again until it can) and answers the calls that fall due. It returns the
// configuration's Validate error, if any.
func (s *OverdueSweeper) Start(ctx context.Context) error {
	if err := s.cfg.Validate(); err != nil {
		return err
	}
	return s.svc.Start(ctx)
}

// Stop ends the consumers and the sweeping goroutine (a look under way is
// cancelled) and waits for them.
func (s *OverdueSweeper) Stop(ctx context.Context) error { return s.svc.Stop(ctx) }

// Stats returns what the sweeper has done so far.
func (s *OverdueSweeper) Stats() OverdueStats {
	n, dropped := s.track.stats()
	return OverdueStats{Tracked: n, Dropped: dropped, Answered: s.answered.Load()}
}

// overdueBatch bounds the calls looked at before the sweeper checks again
// for its stop and for new calls.
const overdueBatch = 100

// run follows the streams and looks at every call when it is due, until
// ctx ends. Following starts at Lookback before the start, and is tried
// again (RetryDelay, growing) while the streams cannot be read.
func (s *OverdueSweeper) run(ctx context.Context) {
	from := time.Now().Add(-s.cfg.Lookback)
	var f follow
	defer f.stop()
	var followFailures uint64
	followAt := time.Now()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		if !f.running() && !time.Now().Before(followAt) {
			if err := s.follow(ctx, &f, from); err != nil && ctx.Err() == nil {
				followFailures++
				followAt = time.Now().Add(s.cfg.retryDelay(followFailures))
				s.cfg.Logger.Warn("overdue sweeper cannot follow the streams; trying again", "err", err, "retry_at", followAt)
			}
		}
		next := s.sweepDue(ctx)
		if ctx.Err() != nil {
			return
		}
		wait := time.Minute
		if !next.IsZero() {
			wait = min(wait, time.Until(next))
		}
		if !f.running() {
			wait = min(wait, time.Until(followAt))
		}
		t.Reset(max(wait, 0))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.track.wake:
		}
	}
}

// sweepDue looks at every call due now, in batches, and returns when the
// next one is due (zero when none is tracked).
func (s *OverdueSweeper) sweepDue(ctx context.Context) time.Time {
	for {
		due, next := s.track.due(time.Now(), overdueBatch)
		for _, c := range due {
			if ctx.Err() != nil {
				s.track.again(c)
				continue
			}
			s.lookAt(ctx, c)
		}
		if len(due) < overdueBatch || ctx.Err() != nil {
			return next
		}
	}
}

// lookAt looks at one due call (within 10s); a look that fails is tried
// again after RetryDelay, growing with its failures: a call is never
// dropped for a failure that may pass.
func (s *OverdueSweeper) lookAt(ctx context.Context, c *tracked) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := s.look(lctx, c)
	if err == nil {
		return
	}
	if ctx.Err() != nil {
		s.track.again(c) // stopping: nothing to report
		return
	}
	c.failures++
	delay := s.cfg.retryDelay(c.failures)
	c.due = time.Now().Add(delay)
	s.cfg.Logger.Error("looking at an overdue call failed; will retry", "call_id", c.callID, "err", err,
		"failures", c.failures, "retry_in", delay)
	s.track.again(c)
}

// follow is the two ordered consumers the sweeper reads.
type follow struct {
	accepted, results *following
}

// following is one ordered consumer being consumed.
type following struct {
	stream jetstream.Stream
	cons   jetstream.Consumer
	cc     jetstream.ConsumeContext
}

func (f *follow) running() bool { return f.accepted != nil }

// stop ends both consumptions, waits for their last callbacks and deletes
// their server consumers (an ordered consumer's Stop leaves its consumer
// until the server finds it inactive).
func (f *follow) stop() {
	for _, c := range []*following{f.accepted, f.results} {
		if c != nil {
			c.stop()
		}
	}
	f.accepted, f.results = nil, nil
}

func (c *following) stop() {
	c.cc.Stop()
	<-c.cc.Closed()
	info := c.cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = c.stream.DeleteConsumer(ctx, info.Name) // else gone when inactive
}

// OverdueConsumerPrefix is how the names of the overdue sweepers' ordered
// consumers (on the events and results streams) begin, for an
// installation of prefix: <prefix>_overdue_.
func OverdueConsumerPrefix(prefix string) string { return bus.Token(prefix) + "_overdue_" }

// follow starts the ordered consumers of the admission records (every
// event: the ACCEPTED ones are kept) and of the stored results (whole
// messages: a result's signature covers its payload), each buffering at
// most pullBytes, both from from (or from now with no
// lookback), named OverdueConsumerPrefix and a random part. An ordered
// consumer that fails later is made again by the client from its next
// sequence.
func (s *OverdueSweeper) follow(ctx context.Context, f *follow, from time.Time) error {
	b := s.cfg.Bus
	cfg := func(filter string) jetstream.OrderedConsumerConfig {
		c := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverNewPolicy,
			NamePrefix: OverdueConsumerPrefix(b.Subjects.Prefix) + strconv.FormatUint(rand.Uint64(), 36)}
		if s.cfg.Lookback >= 0 {
			c.DeliverPolicy, c.OptStartTime = jetstream.DeliverByStartTimePolicy, &from
		}
		return c
	}
	results, err := s.consume(ctx, b.Results, cfg(b.Subjects.AllResults()), s.onResult)
	if err != nil {
		return fmt.Errorf("maintenance: follow results: %w", err)
	}
	accepted, err := s.consume(ctx, b.Events, cfg(b.Subjects.AllEvents()), s.onEvent)
	if err != nil {
		results.stop()
		return fmt.Errorf("maintenance: follow admission records: %w", err)
	}
	f.accepted, f.results = accepted, results
	return nil
}

// consume makes an ordered consumer of stream and consumes it with h; what
// the consumer reports (missed heartbeats, a reset) is logged at Debug:
// the client makes it again by itself.
func (s *OverdueSweeper) consume(ctx context.Context, stream jetstream.Stream, cfg jetstream.OrderedConsumerConfig,
	h jetstream.MessageHandler) (*following, error) {
	cons, err := stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, err
	}
	cc, err := cons.Consume(h, jetstream.PullMaxBytes(pullBytes), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		s.cfg.Logger.Debug("overdue sweeper consumer", "err", err)
	}))
	if err != nil {
		return nil, err
	}
	return &following{stream: stream, cons: cons, cc: cc}, nil
}

// pullBytes bounds the messages each of a sweeper's consumers buffers (a
// result is up to the worker's inline limit, 768 KiB; the client's
// default is 500 messages, whatever their size).
const pullBytes = 16 << 20

// onResult drops the call whose result m is, when it is believed.
func (s *OverdueSweeper) onResult(m jetstream.Msg) {
	subject := m.Subject()
	callID := subject[strings.LastIndexByte(subject, '.')+1:]
	// Not followed (yet: the two consumers need not keep step, and its
	// record may come later): remembered unchecked, so that its record,
	// if it comes, is looked at at once, where the look checks the result.
	tool, ok := s.track.toolOrRemember(callID)
	if !ok {
		return
	}
	// A followed call is answered only by a believed result of its tool
	// (the whole message: its signature covers the payload); one that is
	// not, or that could not be checked, leaves it followed (its look
	// reads the results again).
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	if _, _, err := believed.Check(ctx, s.cfg.Bus.Keys, believed.ConsumedMsg(m), tool); err != nil {
		return
	}
	s.track.answer(callID)
}

// checkTimeout bounds the enrolment lookups of one signature check.
const checkTimeout = 5 * time.Second

// onEvent tracks the call an admission record names; other events, and
// records that cannot be answered safely, are ignored.
func (s *OverdueSweeper) onEvent(m jetstream.Msg) {
	ev := &toolwirev1.CallEvent{}
	if proto.Unmarshal(m.Data(), ev) != nil || ev.Type != toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED {
		return
	}
	if !s.byDispatcher(m, ev) {
		return
	}
	c, why := s.trackedOf(m, ev)
	if why != "" {
		s.cfg.Logger.Debug("admission record not followed", "subject", m.Subject(), "reason", why)
		return
	}
	if dropped := s.track.add(c); dropped > 0 && isPowerOf10(dropped) {
		s.cfg.Logger.Warn("overdue sweeper follows MaxTracked calls; admission records dropped", "dropped", dropped,
			"max_tracked", s.cfg.MaxTracked)
	}
}

// trackedOf is the call an admission record names, due when its answer
// is overdue; or why it is not followed. The record's subject,
// <prefix>.event.<tenant>.<dispatcher>.<call_id>, must name exactly the
// record's tenant (a valid name) and call id: an answer lands in that
// tenant's results, never on a stranger's word.
func (s *OverdueSweeper) trackedOf(m jetstream.Msg, ev *toolwirev1.CallEvent) (*tracked, string) {
	rest, ok := strings.CutPrefix(m.Subject(), s.cfg.Bus.Subjects.Prefix+".event.")
	toks := strings.Split(rest, ".")
	tenant := ev.GetCaller().GetTenant()
	switch {
	case !ok || len(toks) != 3:
		return nil, "not an event subject"
	case !bus.ValidTenant(tenant) || toks[0] != tenant:
		return nil, "its tenant is no valid name or not its subject's"
	case ev.CallId == "" || toks[2] != bus.Token(ev.CallId):
		return nil, "its call id is not its subject's"
	}
	c := &tracked{callID: ev.CallId, tenant: tenant, dispatcher: toks[1], tool: ev.Tool, session: ev.GetCaller().GetSession(),
		spec: ev.SpecVersion, accepted: ev.GetTime().AsTime()}
	if ev.Time == nil {
		if md, err := m.Metadata(); err == nil {
			c.accepted = md.Timestamp
		}
	}
	switch {
	case ev.Deadline != nil:
		c.deadline = ev.Deadline.AsTime()
		c.due = c.deadline.Add(s.cfg.Grace)
	case s.cfg.NoDeadline < 0:
		return nil, "no deadline, and NoDeadline is never"
	default:
		c.due = c.accepted.Add(s.cfg.NoDeadline)
	}
	// Replicas that follow the same calls do not look at them in step: one
	// usually answers, the others find its answer.
	c.due = c.due.Add(rand.N(min(s.cfg.Grace/8, 5*time.Second) + 1))
	return c, ""
}

// isPowerOf10 reports whether n is 1, 10, 100, …: drops are logged that
// often.
func isPowerOf10(n uint64) bool {
	for n >= 10 && n%10 == 0 {
		n /= 10
	}
	return n == 1
}

// byDispatcher reports whether ev, an admission record, is signed by a
// dispatcher's key (internal/signing): only the dispatchers admit calls,
// and a record of anyone else's making is not followed.
func (s *OverdueSweeper) byDispatcher(m jetstream.Msg, ev *toolwirev1.CallEvent) bool {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	v, err := s.cfg.Bus.Keys.Check(ctx, m.Headers(), signing.KindEvent, ev.GetCallId(), ev.GetAttempt(), m.Data(), "")
	if err != nil || !v.Dispatcher {
		s.cfg.Logger.Warn("admission record not signed by a dispatcher; not followed", "subject", m.Subject(), "err", err)
		return false
	}
	return true
}
