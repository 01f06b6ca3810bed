package archive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/bus"
)

// streamReader reads a stream's messages in order from a sequence up to
// a snapshot's last sequence, through a bus.Scan (no consumer is left on
// the stream however it ends), a fetch of up to 512 at a time.
type streamReader struct {
	stream string
	scan   *bus.Scan
	last   uint64
	from   uint64 // the next sequence wanted
	buf    []*Message
	done   bool
	empty  int
}

func newStreamReader(ctx context.Context, stream jetstream.Stream, prefix string, from, last uint64) (*streamReader, error) {
	scan, err := bus.NewScan(ctx, stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from, NamePrefix: prefix + "_archiver",
	})
	if err != nil {
		return nil, fmt.Errorf("archive: read %s: %w", stream.CachedInfo().Config.Name, err)
	}
	return &streamReader{stream: stream.CachedInfo().Config.Name, scan: scan, from: from, last: last}, nil
}

func (r *streamReader) close() { _ = r.scan.Close() }

// next returns the next message, nil after the snapshot's last one (or
// when the stream holds no more). It returns ctx's error once ctx ends
// (within a fetch's wait, a second).
func (r *streamReader) next(ctx context.Context) (*Message, error) {
	for len(r.buf) == 0 {
		if r.done {
			return nil, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("archive: read %s: %w", r.stream, err)
		}
		if err := r.fetch(ctx); err != nil {
			return nil, err
		}
	}
	m := r.buf[0]
	r.buf = r.buf[1:]
	return m, nil
}

func (r *streamReader) fetch(ctx context.Context) error {
	// Never ask for more than the snapshot holds, so that the last fetch
	// ends at once instead of waiting out its expiry.
	want := 512
	if r.from <= r.last && r.last-r.from+1 < uint64(want) {
		want = int(r.last - r.from + 1)
	}
	batch, err := r.scan.Fetch(want, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		return fmt.Errorf("archive: read %s: %w", r.stream, err)
	}
	n := 0
	for msg := range batch.Messages() {
		n++
		md, err := msg.Metadata()
		if err != nil || r.done {
			continue
		}
		r.from = md.Sequence.Stream + 1
		if md.Sequence.Stream >= r.last {
			r.done = true
		}
		if md.Sequence.Stream > r.last {
			continue
		}
		r.buf = append(r.buf, &Message{Stream: r.stream, Subject: msg.Subject(), Seq: md.Sequence.Stream,
			Time: md.Timestamp.UTC(), Header: msg.Headers(), Data: msg.Data()})
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
		return fmt.Errorf("archive: read %s: %w", r.stream, err)
	}
	if n > 0 {
		r.empty = 0
		return nil
	}
	// An empty fetch is the end only when nothing is pending; a stalled
	// server (an election) is waited for, up to a minute.
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ci, err := r.scan.Info(ictx)
	if err != nil {
		return fmt.Errorf("archive: read %s: %w", r.stream, err)
	}
	if ci.NumPending == 0 {
		r.done = true
		return nil
	}
	if r.empty++; r.empty > 60 {
		return fmt.Errorf("archive: read %s: no progress for a minute with %d messages pending", r.stream, ci.NumPending)
	}
	return nil
}
