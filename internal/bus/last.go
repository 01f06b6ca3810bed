package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// LastMsg returns the newest message of stream on any subject matching
// filter, or jetstream.ErrMsgNotFound.
//
// A filter with wildcards is resolved to literal subjects first (stream
// info with a subject filter), then each is read by a literal
// last-by-subject get: the server's wildcard last-by-subject get was seen
// to miss messages that were stored (nats-server 2.15.2, under parallel
// load), while literal gets and subject totals agree with the store.
func LastMsg(ctx context.Context, stream jetstream.Stream, filter string) (*jetstream.RawStreamMsg, error) {
	if !strings.ContainsAny(filter, "*>") {
		return stream.GetLastMsgForSubject(ctx, filter)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("bus: subjects of %s: %w", filter, err)
	}
	var last *jetstream.RawStreamMsg
	for subject := range info.State.Subjects {
		m, err := stream.GetLastMsgForSubject(ctx, subject)
		if err != nil {
			if err == jetstream.ErrMsgNotFound {
				continue
			}
			return nil, err
		}
		if last == nil || m.Sequence > last.Sequence {
			last = m
		}
	}
	if last == nil {
		return nil, jetstream.ErrMsgNotFound
	}
	return last, nil
}

// AllMsgs returns every message of stream on subjects matching filter,
// oldest first, without a consumer: the literal subjects are resolved as
// in LastMsg, then each is read forward by direct gets of the next
// message on it. Meant for the handful of messages of one call (its
// events); a role that reads this way needs no consumer on the stream.
func AllMsgs(ctx context.Context, stream jetstream.Stream, filter string) ([]*jetstream.RawStreamMsg, error) {
	subjects := []string{filter}
	if strings.ContainsAny(filter, "*>") {
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			return nil, fmt.Errorf("bus: subjects of %s: %w", filter, err)
		}
		subjects = subjects[:0]
		for s := range info.State.Subjects {
			subjects = append(subjects, s)
		}
	}
	var out []*jetstream.RawStreamMsg
	for _, subject := range subjects {
		for seq := uint64(1); ; {
			m, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("bus: read %s: %w", subject, err)
			}
			out = append(out, m)
			seq = m.Sequence + 1
		}
	}
	slices.SortFunc(out, func(a, b *jetstream.RawStreamMsg) int { return cmp.Compare(a.Sequence, b.Sequence) })
	return out, nil
}
