package dlq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/bus"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ErrNotFound is returned by Get and Retry for a sequence that holds no
// dead letter: never written, aged out of the stream, or out of range.
var ErrNotFound = errors.New("dlq: no such dead letter")

// Letter is one dead letter as stored.
type Letter struct {
	// Seq is the record's sequence in the DLQ stream; Get and Retry take it.
	Seq uint64
	// Subject is the DLQ subject, <prefix>.dlq.<type>.<tenant>.<provider>.<tool>.
	Subject string
	// Stored is when the stream stored the record.
	Stored time.Time
	// Record is the dead letter. Record.Call is nil when the dead call
	// could not be decoded; Record.Raw then holds its bytes.
	Record *toolwirev1.DeadLetter
}

// Tool returns the dead call's tool: the decoded call's, else the last
// token of the subject (`_unknown` for undecodable calls).
func (l *Letter) Tool() string {
	if t := l.Record.GetCall().GetTool(); t != "" {
		return t
	}
	return l.Subject[strings.LastIndexByte(l.Subject, '.')+1:]
}

// Time returns when the record was written: the writer's time, else the
// stream's.
func (l *Letter) Time() time.Time {
	if t := l.Record.GetTime(); t != nil {
		return t.AsTime()
	}
	return l.Stored
}

// ListOptions select the letters List returns.
type ListOptions struct {
	// Limit is how many letters to return, the newest; 0 = all.
	Limit int
	// Tool returns only the dead calls of this tool; "" = every tool.
	Tool string
}

// fetchBatch is how many letters List asks the server for at once.
const fetchBatch = 256

// List returns the dead letters opts select, oldest first. It reads the
// stream from its start with an ordered consumer (the DLQ is small:
// dead letters are exceptions), so it sees the letters stored when it
// began. Errors are the server's.
func (q *Queue) List(ctx context.Context, opts ListOptions) ([]*Letter, error) {
	if opts.Limit < 0 {
		return nil, fmt.Errorf("dlq: Limit %d must not be negative", opts.Limit)
	}
	filter := q.subj.AllDLQ()
	if opts.Tool != "" {
		// <prefix>.dlq.<type>.<tenant>.<provider>.<tool>
		filter = strings.TrimSuffix(filter, ">") + "*.*.*." + bus.Token(opts.Tool)
	}
	info, err := q.dlq.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("dlq: stream info: %w", err)
	}
	var total uint64
	for _, n := range info.State.Subjects {
		total += n
	}
	if total == 0 {
		return nil, nil
	}
	cons, err := bus.NewScan(ctx, q.dlq, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return nil, fmt.Errorf("dlq: read: %w", err)
	}
	defer func() { _ = cons.Close() }() // no consumer left on DLQ
	var out []*Letter
	for {
		batch, err := cons.FetchNoWait(fetchBatch)
		if err != nil {
			return nil, fmt.Errorf("dlq: read: %w", err)
		}
		n, done := 0, false
		for m := range batch.Messages() {
			n++
			meta, err := m.Metadata()
			if err != nil {
				return nil, fmt.Errorf("dlq: read: %w", err)
			}
			l, err := decode(meta.Sequence.Stream, m.Subject(), meta.Timestamp, m.Data())
			if err != nil {
				return nil, err
			}
			if opts.Tool == "" || l.Record.GetCall() == nil || l.Record.GetCall().GetTool() == opts.Tool {
				out = append(out, l)
				if opts.Limit > 0 && len(out) > opts.Limit {
					out = out[1:] // keep the newest Limit
				}
			}
			done = meta.NumPending == 0
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, fmt.Errorf("dlq: read: %w", err)
		}
		if done || n == 0 || ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
}

// Get returns the dead letter at sequence seq, or an error matching
// ErrNotFound.
func (q *Queue) Get(ctx context.Context, seq uint64) (*Letter, error) {
	if seq == 0 { // sequences start at 1
		return nil, fmt.Errorf("%w at sequence 0", ErrNotFound)
	}
	m, err := q.dlq.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("%w at sequence %d", ErrNotFound, seq)
	}
	if err != nil {
		return nil, fmt.Errorf("dlq: get %d: %w", seq, err)
	}
	return decode(m.Sequence, m.Subject, m.Time, m.Data)
}

func decode(seq uint64, subject string, stored time.Time, data []byte) (*Letter, error) {
	dl := &toolwirev1.DeadLetter{}
	if err := proto.Unmarshal(data, dl); err != nil {
		return nil, fmt.Errorf("dlq: record %d is not a DeadLetter: %w", seq, err)
	}
	if dl.GetCall().GetCallId() == "" {
		dl.Call = nil // nothing a retry could use
	}
	return &Letter{Seq: seq, Subject: subject, Stored: stored, Record: dl}, nil
}
