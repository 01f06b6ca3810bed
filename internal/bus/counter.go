package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// counterIncrHeader makes a publish on a counter stream (AllowMsgCounter)
// an increment of its subject's counter by the header's value.
const counterIncrHeader = "Nats-Incr"

// maxCounterAck bounds the acknowledgement of an increment that
// AddToCounter reads: a PubAck with a counter's value, or an API error,
// is well under it.
const maxCounterAck = 1024

// counterTimeout bounds an increment whose context has no deadline, as
// nats.go's jetstream bounds its API requests (5 s).
const counterTimeout = 5 * time.Second

// ErrCounterAck is returned by AddToCounter for an acknowledgement it
// cannot read (too long, not JSON, or a value that is no int64).
var ErrCounterAck = errors.New("bus: malformed counter acknowledgement")

// counterAck is the PubAck of a counter stream: the usual fields and the
// counter's value after the increment, a decimal string (the server
// counts in big integers).
type counterAck struct {
	Error  *jetstream.APIError `json:"error,omitempty"`
	Stream string              `json:"stream"`
	Value  string              `json:"val"`
}

// AddToCounter adds delta (negative to take away) to the counter of
// subject, a subject of a counter stream (the delegation stream), and
// returns its value after the change, in one round trip: a request with
// the Nats-Incr header, whose PubAck carries the new value (nats.go
// v1.55 has the stream setting, AllowMsgCounter, but no client API for
// counters). The stream's leader applies the increments of a subject one
// after the other, so two processes adding 1 to the same counter at once
// get two different values. A counter without a message (never written,
// or expired) counts from 0. The answer is bounded (maxCounterAck) before
// it is parsed; a server error is returned as its *jetstream.APIError
// (StoreFull and the like read it). A request that fails (no answer
// before ctx ends, or no responders) may or may not have been applied:
// the caller decides what that means. Without a deadline in ctx the
// request waits at most 5 s.
func AddToCounter(ctx context.Context, nc *nats.Conn, subject string, delta int64) (int64, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, counterTimeout)
		defer cancel()
	}
	m := nats.NewMsg(subject)
	m.Header.Set(counterIncrHeader, strconv.FormatInt(delta, 10))
	resp, err := nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		return 0, fmt.Errorf("bus: add to counter: %w", err)
	}
	if len(resp.Data) > maxCounterAck {
		return 0, fmt.Errorf("%w: %d bytes", ErrCounterAck, len(resp.Data))
	}
	var ack counterAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrCounterAck, err)
	}
	if ack.Error != nil {
		return 0, fmt.Errorf("bus: add to counter: %w", ack.Error)
	}
	n, err := strconv.ParseInt(ack.Value, 10, 64)
	if err != nil || ack.Stream == "" {
		return 0, fmt.Errorf("%w: value %.32q of stream %.64q", ErrCounterAck, ack.Value, ack.Stream)
	}
	return n, nil
}
