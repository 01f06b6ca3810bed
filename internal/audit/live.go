package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/bus"
)

// liveRead is the part of a run (the calls scan, the refusals scan) that
// reads a live stream after what the archive gave: an ordered consumer
// (a Scan: none of the audit's is left on the stream when it ends) that
// starts at Since or after covered, fetches up to 256 at a time, reads
// from the archive first what the stream dropped since the run began,
// and ends when visit says so, when until is reached, or when the
// consumer has nothing pending; a stalled server (a leader election) is
// waited for, 30 s at most.
type liveRead struct {
	stream  jetstream.Stream
	what    string // in errors: "calls", "events"
	filters []string
	since   time.Time
	covered *uint64 // read up to here (archive or live); updated by archived and visit
	// until is the last sequence to read (0: to the end): the last fetch
	// asks for no more than that, so that it ends at once.
	until    uint64
	archived func(ctx context.Context, to uint64) (done bool, err error) // nil: no archive
	visit    func(ctx context.Context, msg jetstream.Msg, md *jetstream.MsgMetadata) (done bool, err error)
	progress func() // after each fetch; may be nil
}

func (l *liveRead) run(ctx context.Context) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: l.filters}
	switch {
	case !l.since.IsZero():
		t := l.since
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &t
	case *l.covered > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, *l.covered+1
	}
	cons, err := bus.NewScan(ctx, l.stream, cfg)
	if err != nil {
		return fmt.Errorf("audit: read %s: %w", l.what, err)
	}
	defer func() { _ = cons.Close() }()
	empties := 0
	for l.until == 0 || *l.covered < l.until {
		want := 256
		if l.until > 0 && *l.covered > 0 && l.until-*l.covered < uint64(want) {
			want = int(l.until - *l.covered)
		}
		batch, err := cons.Fetch(want, jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			return fmt.Errorf("audit: read %s: %w", l.what, err)
		}
		n, done, err := l.batch(ctx, batch)
		if err != nil || done {
			return err
		}
		if l.progress != nil {
			l.progress()
		}
		if n > 0 {
			empties = 0
			continue
		}
		// An empty fetch is the end only when the consumer has nothing
		// pending.
		ci, err := cons.Info(ctx)
		if err != nil {
			return fmt.Errorf("audit: read %s: %w", l.what, err)
		}
		if ci.NumPending == 0 {
			return nil
		}
		if empties++; empties > 60 {
			return fmt.Errorf("audit: read %s: no progress for 30s with %d messages pending", l.what, ci.NumPending)
		}
	}
	return nil
}

// batch handles the messages of one fetch; it always drains the batch
// (so the fetch's goroutine ends) and reports whether the run is done.
// With an archive, the messages the live stream dropped after covered
// (aged out since the run began) are read from the archive first.
func (l *liveRead) batch(ctx context.Context, batch jetstream.MessageBatch) (n int, done bool, err error) {
	if l.archived != nil {
		var first uint64
		if first, err = liveFirst(ctx, l.stream); err == nil && first > 1 {
			done, err = l.archived(ctx, first-1)
		}
	}
	for msg := range batch.Messages() {
		n++
		if done || err != nil {
			continue
		}
		md, merr := msg.Metadata()
		if merr != nil {
			err = fmt.Errorf("audit: read %s: %w", l.what, merr)
			continue
		}
		done, err = l.visit(ctx, msg, md)
	}
	if berr := batch.Error(); berr != nil && !errors.Is(berr, nats.ErrTimeout) && err == nil {
		err = fmt.Errorf("audit: read %s: %w", l.what, berr)
	}
	return n, done, err
}
