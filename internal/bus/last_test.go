package bus_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
)

// LastMsgFromLeader finds what LastMsg finds, through the stream API the
// leader answers: the newest message on a literal subject or on any
// subject a filter matches, ErrMsgNotFound when there is none.
func TestLastMsgFromLeader(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx := t.Context()
	b := env.Bus
	for _, p := range []struct{ subject, data string }{
		{b.Subjects.Event("acme", "d1", "01CALL"), "accepted"},
		{b.Subjects.Event("acme", "d2", "01CALL"), "started"},
		{b.Subjects.Event("acme", "d1", "01OTHER"), "other"},
	} {
		_, err := b.JS.Publish(ctx, p.subject, []byte(p.data))
		require.NoError(t, err)
	}
	for filter, want := range map[string]string{
		b.Subjects.Event("acme", "d1", "01CALL"):            "accepted",
		b.Subjects.EventsAnyDispatcher("acme", "01CALL"):    "started",
		b.Subjects.EventsAnyDispatcher("acme", "01OTHER"):   "other",
		b.Subjects.EventsAnyDispatcher("acme", "01MISSING"): "",
		b.Subjects.Event("acme", "d1", "01MISSING"):         "",
	} {
		m, err := bus.LastMsgFromLeader(ctx, b.JS, b.Events, filter)
		if want == "" {
			require.ErrorIs(t, err, jetstream.ErrMsgNotFound, filter)
			continue
		}
		require.NoError(t, err, filter)
		require.Equal(t, want, string(m.Data), filter)
		direct, err := bus.LastMsg(ctx, b.Events, filter)
		require.NoError(t, err, filter)
		require.Equal(t, direct.Sequence, m.Sequence, filter)
		require.Equal(t, direct.Subject, m.Subject, filter)
	}
}
