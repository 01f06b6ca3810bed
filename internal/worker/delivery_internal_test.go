package worker

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// ackMsg is a jetstream.Msg with only a reply subject.
type ackMsg struct {
	jetstream.Msg
	reply string
}

func (m ackMsg) Reply() string { return m.reply }

func (m ackMsg) Metadata() (*jetstream.MsgMetadata, error) { return nil, nats.ErrNotJSMessage }

// The delivery count is read from both forms of the ack subject; anything
// else counts as a first delivery.
func TestDeliveryCount(t *testing.T) {
	t.Parallel()
	for reply, want := range map[string]int32{
		"$JS.ACK.CALLS.pool.3.17.12.1732240000000000000.0":            3,
		"$JS.ACK._.HASH.CALLS.pool.7.17.12.1732240000000000000.0.tok": 7,
		"$JS.ACK.hub.HASH.CALLS.pool.12.17.12.1732240000000000000.4":  12,
		"$JS.ACK.CALLS.pool.x.17.12.1732240000000000000.0":            1,
		"$JS.ACK.CALLS.pool.0.17.12.1732240000000000000.0":            1,
		"_INBOX.abc": 1,
		"":           1,
		"$JS.NAK._.HASH.CALLS.pool.7.17.12.1732240000000000000.0.tok":     1,
		"$JS.ACK._.HASH.CALLS.pool.99999999999.1.1.1732240000000000000.0": 1,
	} {
		require.Equal(t, want, deliveryCount(ackMsg{reply: reply}), reply)
	}
}
