package bus

import (
	"context"
	"fmt"
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
