package callindex

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/redact"
	"github.com/toolwire/toolwire/internal/startstop"
)

// Pauses of the Feed before it starts a run again after a failure: the
// first, and the longest (doubling up to it).
const (
	restartPause    = time.Second
	restartPauseMax = 30 * time.Second
)

// errRunning is returned by run while another run feeds the index.
var errRunning = errors.New("callindex: the calls index is already running")

// errNoStreams is returned by Feed.Start and run for an index without
// streams.
var errNoStreams = errors.New("callindex: the calls index has no streams")

// Feed is the one writer of an Index (a startstop.Service): Start runs the
// feed in a goroutine until Stop, and starts it again after a run that
// fails (its stream reads failed for good: a long outage) after a pause of
// 1s, doubling to 30s; each run carries on from the newest call the index
// has. Start refuses an index without streams.
type Feed struct {
	x    *Index
	loop *startstop.Loop
}

// NewFeed returns the feed of x.
func NewFeed(x *Index) *Feed {
	f := &Feed{x: x}
	f.loop = startstop.NewLoop(f.runAgain)
	return f
}

// Start starts the feed: the rebuild (then the index's Ready is closed),
// then live. It returns once the feed's goroutine runs.
func (f *Feed) Start(ctx context.Context) error {
	if f.x.streams.Calls == nil {
		return errNoStreams
	}
	return f.loop.Start(ctx)
}

// Stop ends the feed and waits for it (within ctx); the index's live
// subscriptions are closed.
func (f *Feed) Stop(ctx context.Context) error { return f.loop.Stop(ctx) }

// runAgain runs the feed until ctx ends, starting a failed run again after
// a pause.
func (f *Feed) runAgain(ctx context.Context) {
	pause := restartPause
	for {
		err := f.x.run(ctx)
		if ctx.Err() != nil {
			return
		}
		f.x.log.Error("calls index stopped; starting it again", "err", err, "in", pause)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, restartPauseMax)
	}
}

// run is one run of the feed: it feeds the index from the streams until
// ctx ends: the rebuild (then Ready is closed), then live. It returns nil
// when ctx ends; otherwise the error that stopped it, wrapped (a stream
// that cannot be read, a consumer that stopped: its connection closed),
// after which run may be called again, or an error at once while another
// run runs. Live subscriptions are closed when it returns.
func (x *Index) run(ctx context.Context) error {
	if x.streams.Calls == nil {
		return errNoStreams
	}
	if !x.running.CompareAndSwap(false, true) {
		return errRunning
	}
	defer x.running.Store(false)
	defer x.closeSubscribers()
	f := &feeder{x: x, streams: x.streams, log: x.log, specs: map[string]specInfo{},
		held:    newFIFO[*redact.Secrets](maxHeldSecrets, maxHeldBytes),
		orphans: newFIFO[orphan](maxOrphans, maxOrphanBytes), shadow: strings.TrimSuffix(x.streams.Subjects.AllShadow(), ">")}
	err := f.run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// feeder is the one writer of an Index while a run of its feed runs.
type feeder struct {
	x       *Index
	streams Streams
	log     *slog.Logger
	specs   map[string]specInfo // name@version
	held    *fifo[*redact.Secrets]
	shadow  string // prefix of the replays' subjects
	live    bool   // past the rebuild: publish updates

	orphans                     *fifo[orphan]
	callsPending, resultPending uint64
}

func (f *feeder) run(ctx context.Context) error {
	start := time.Now()
	// RESULTS' last sequence first: a call stored after the CALLS
	// snapshot has its result after this one.
	rinfo, err := f.streams.Results.Info(ctx)
	if err != nil {
		return fmt.Errorf("callindex: results stream: %w", err)
	}
	results0 := rinfo.State.LastSeq
	callsDone, err := f.rebuildCalls(ctx)
	if err != nil {
		return err
	}
	resultsDone, err := f.rebuildResults(ctx, results0)
	if err != nil {
		return err
	}
	eventsDone, err := f.rebuildRefusals(ctx)
	if err != nil {
		return fmt.Errorf("callindex: read refusals: %w", err)
	}
	f.x.rebuild.Store(int64(time.Since(start)))
	f.x.readyOnce.Do(func() { close(f.x.ready) })
	f.x.mu.RLock()
	n := f.x.n
	f.x.mu.RUnlock()
	f.log.Debug("calls index rebuilt", "calls", n, "took", time.Since(start))
	f.live = true
	f.x.live.Store(true)
	defer f.x.live.Store(false)
	return f.follow(ctx, [3]uint64{callsDone + 1, resultsDone + 1, eventsDone + 1})
}

// rebuildCalls reads CALLS from the window of the newest Max messages up
// to its last sequence, then again up to the new last sequence while
// calls keep coming (a few passes), so that the results read next find
// their calls. It returns the last sequence read up to.
func (f *feeder) rebuildCalls(ctx context.Context) (uint64, error) {
	info, err := f.streams.Calls.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("callindex: calls stream: %w", err)
	}
	last := info.State.LastSeq
	from := max(info.State.FirstSeq, 1)
	if last >= uint64(f.x.max) {
		from = max(from, last-uint64(f.x.max)+1)
	}
	if s := f.x.Stats().LastSeq; s >= from { // run again: resume
		from = s + 1
	}
	for pass := 0; ; pass++ {
		if last >= from {
			cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from}
			r := span{stream: f.streams.Calls, cfg: cfg, last: last, want: last - from + 1, handle: f.onCall}
			if err := f.read(ctx, r); err != nil {
				return 0, fmt.Errorf("callindex: read calls: %w", err)
			}
		}
		if pass == 4 {
			return last, nil
		}
		info, err := f.streams.Calls.Info(ctx)
		if err != nil {
			return 0, fmt.Errorf("callindex: calls stream: %w", err)
		}
		if info.State.LastSeq <= last {
			return last, nil
		}
		from, last = last+1, info.State.LastSeq
	}
}

// rebuildResults reads RESULTS up to its last sequence: from the oldest
// indexed call's time less TimeSlack, or after results0 when no call is
// indexed. It returns the last sequence read up to.
func (f *feeder) rebuildResults(ctx context.Context, results0 uint64) (uint64, error) {
	info, err := f.streams.Results.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("callindex: results stream: %w", err)
	}
	last := info.State.LastSeq
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: results0 + 1}
	f.x.mu.RLock()
	if f.x.n > 0 {
		t := time.Unix(0, f.x.unix[f.x.slot(0)]).Add(-TimeSlack)
		cfg = jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &t}
	}
	f.x.mu.RUnlock()
	if cfg.DeliverPolicy == jetstream.DeliverByStartSequencePolicy && last < cfg.OptStartSeq {
		return last, nil
	}
	if err := f.read(ctx, span{stream: f.streams.Results, cfg: cfg, last: last, want: 1, handle: f.onResult}); err != nil {
		return 0, fmt.Errorf("callindex: read results: %w", err)
	}
	return last, nil
}

// scanPrefix names the rebuild's scan consumers (bus.Scan NamePrefix):
// the feed runs in a dispatcher, whose role may name consumers freely, so
// it leaves the operators' scan slots to them.
const scanPrefix = "callindex_"

// span is a part of a stream the rebuild reads: from cfg's start up to
// sequence last, each message handed to handle; want is how many to ask
// for first.
type span struct {
	stream     jetstream.Stream
	cfg        jetstream.OrderedConsumerConfig
	last, want uint64
	handle     func(context.Context, jetstream.Msg, *jetstream.MsgMetadata)
}

// read hands the messages of r to r.handle, in order. It ends at r.last,
// or when nothing more is pending.
func (f *feeder) read(ctx context.Context, r span) error {
	last, want := r.last, r.want
	cfg := r.cfg
	cfg.NamePrefix = scanPrefix // a dispatcher's: no operator's scan slot
	scan, err := bus.NewScan(ctx, r.stream, cfg)
	if err != nil {
		return err
	}
	defer func() {
		if err := scan.Close(); err != nil {
			f.log.Debug("calls index scan not deleted; the server removes it when inactive", "err", err)
		}
	}()
	empties := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch, err := scan.Fetch(int(min(want, fetchBatch)), jetstream.FetchMaxWait(time.Second), jetstream.FetchMaxBytes(fetchMaxBytes))
		if err != nil {
			return err
		}
		n, seq, pending, past, berr := 0, uint64(0), uint64(0), false, error(nil)
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				berr = cmp.Or(berr, err)
				continue
			}
			n++
			if md.Sequence.Stream > last {
				past = true
			}
			if past || berr != nil {
				continue
			}
			seq, pending = md.Sequence.Stream, md.NumPending
			r.handle(ctx, m, md)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			berr = cmp.Or(berr, err)
		}
		if berr != nil {
			return berr
		}
		if past || seq >= last {
			return nil
		}
		if n == 0 {
			info, err := scan.Info(ctx)
			if err != nil {
				return err
			}
			if info.NumPending == 0 {
				return nil
			}
			if empties++; empties > 30 {
				return fmt.Errorf("no progress for 30s with %d messages pending", info.NumPending)
			}
			continue
		}
		empties = 0
		want = max(1, min(pending, last-seq))
	}
}

// delivery is a message of a live consumer: of CALLS, RESULTS or EVENTS.
type delivery struct {
	m      jetstream.Msg
	stream int // followed's index
}

// followed are the streams follow consumes, in the order of its from.
const (
	followCalls = iota
	followResults
	followEvents
)

// follow consumes CALLS, RESULTS and EVENTS (when the index has it) from
// the sequences from until ctx ends. The consumers hand their messages
// to this goroutine, which indexes them. Shutdown: the callbacks are
// released (stop), then each consumer is stopped and waited for, then its
// server consumer deleted.
func (f *feeder) follow(ctx context.Context, from [3]uint64) error {
	in := make(chan delivery, 256)
	stop := make(chan struct{})
	type consumer struct {
		stream jetstream.Stream
		cons   jetstream.Consumer
		cc     jetstream.ConsumeContext
		closed <-chan struct{}
	}
	var started []consumer
	defer func() {
		close(stop)
		for _, c := range started {
			c.cc.Stop()
			<-c.closed
			f.deleteConsumer(c.stream, c.cons)
		}
	}()
	streams := []struct {
		stream jetstream.Stream
		filter string
	}{{f.streams.Calls, f.streams.Subjects.AllCalls()}, {f.streams.Results, ""}, {f.streams.Events, f.streams.Subjects.AllEvents()}}
	closed := [3]<-chan struct{}{}
	for k, s := range streams {
		if s.stream == nil {
			continue // no EVENTS: no refusals
		}
		cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from[k],
			InactiveThreshold: bus.ScanInactive}
		if s.filter != "" {
			cfg.FilterSubjects = []string{s.filter}
		}
		cons, err := s.stream.OrderedConsumer(ctx, cfg)
		if err != nil {
			return fmt.Errorf("callindex: follow: %w", err)
		}
		cc, err := cons.Consume(func(m jetstream.Msg) {
			select {
			case in <- delivery{m: m, stream: k}:
			case <-stop:
			}
		}, jetstream.PullMaxBytes(consumeMaxByte), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			f.log.Debug("calls index consumer", "err", err)
		}))
		if err != nil {
			f.deleteConsumer(s.stream, cons)
			return fmt.Errorf("callindex: follow: %w", err)
		}
		started = append(started, consumer{stream: s.stream, cons: cons, cc: cc, closed: cc.Closed()})
		closed[k] = cc.Closed()
	}
	return f.indexLive(ctx, in, closed)
}

// indexLive indexes the deliveries of follow's consumers until ctx ends
// or one of them stops (closed; a nil channel: not followed).
func (f *feeder) indexLive(ctx context.Context, in <-chan delivery, closed [3]<-chan struct{}) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-closed[followCalls]:
			return errors.New("callindex: the calls consumer stopped")
		case <-closed[followResults]:
			return errors.New("callindex: the results consumer stopped")
		case <-closed[followEvents]:
			return errors.New("callindex: the events consumer stopped")
		case d := <-in:
			md, err := d.m.Metadata()
			if err != nil {
				f.log.Debug("calls index: message without metadata", "subject", d.m.Subject(), "err", err)
				continue
			}
			switch d.stream {
			case followCalls:
				f.onCall(ctx, d.m, md)
			case followResults:
				f.onResult(ctx, d.m, md)
			default:
				f.onEvent(ctx, d.m, md)
			}
		}
	}
}

// deleteConsumer deletes an ordered consumer's current server consumer
// (Stop leaves it until its inactivity threshold).
func (f *feeder) deleteConsumer(stream jetstream.Stream, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := stream.DeleteConsumer(ctx, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		f.log.Debug("calls index consumer not deleted; the server removes it when inactive", "consumer", info.Name, "err", err)
	}
}

// lagged records the messages left after md on its stream.
func (f *feeder) lagged(md *jetstream.MsgMetadata, results bool) {
	if results {
		f.resultPending = md.NumPending
	} else {
		f.callsPending = md.NumPending
	}
	f.x.lag.Store(f.callsPending + f.resultPending)
}
