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

// MsgsBetweenFromLeader reads one literal subject from a sequence up to
// (not including) another: what a worker reads back after storing its
// STARTED event. Messages on other subjects, before from and at or after
// before are left out; before 0 reads to the end.
func TestMsgsBetweenFromLeader(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx := t.Context()
	b := env.Bus
	subject, other := b.Subjects.Event("acme", "d1", "01CALL"), b.Subjects.Event("acme", "d1", "01OTHER")
	var seqs []uint64 // of subject's messages
	for i, s := range []string{subject, other, subject, subject, other, subject} {
		ack, err := b.JS.Publish(ctx, s, []byte{byte('a' + i)})
		require.NoError(t, err)
		if s == subject {
			seqs = append(seqs, ack.Sequence)
		}
	}
	read := func(from, before uint64) []uint64 {
		msgs, err := bus.MsgsBetweenFromLeader(ctx, b.JS, b.Events, subject, from, before)
		require.NoError(t, err)
		var got []uint64
		for _, m := range msgs {
			require.Equal(t, subject, m.Subject)
			got = append(got, m.Sequence)
		}
		return got
	}
	require.Equal(t, seqs, read(0, 0), "everything")
	require.Equal(t, seqs[:3], read(1, seqs[3]), "before the last")
	require.Equal(t, seqs[1:3], read(seqs[0]+1, seqs[3]), "between")
	require.Empty(t, read(seqs[1], seqs[1]), "an empty range")
	require.Equal(t, seqs[3:], read(seqs[3], 0), "to the end")
}

// KVKeysFromLeader lists the keys a filter matches that hold a value, as
// the bucket's leader stores them: a deleted or purged key is left out,
// a key past the filter's one token too, and at most limit are returned.
func TestKVKeysFromLeader(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx := t.Context()
	b := env.Bus
	for _, k := range []string{"dlg.acme.p.c1", "dlg.acme.p.c2", "dlg.acme.p.c3", "dlg.acme.p.c4", "dlg.acme.p.c1.deeper", "dlg.acme.q.c1"} {
		_, err := b.Limits.Put(ctx, k, []byte("x"))
		require.NoError(t, err)
	}
	require.NoError(t, b.Limits.Delete(ctx, "dlg.acme.p.c2"))
	require.NoError(t, b.Limits.Purge(ctx, "dlg.acme.p.c3"))
	stream, err := b.JS.Stream(ctx, "KV_"+b.Config.LimitsBucket())
	require.NoError(t, err)

	keys, err := bus.KVKeysFromLeader(ctx, b.JS, stream, "dlg.acme.p.*", 10)
	require.NoError(t, err)
	require.Equal(t, []string{"dlg.acme.p.c1", "dlg.acme.p.c4"}, keys)
	keys, err = bus.KVKeysFromLeader(ctx, b.JS, stream, "dlg.acme.p.*", 1)
	require.NoError(t, err)
	require.Equal(t, []string{"dlg.acme.p.c1"}, keys)
	keys, err = bus.KVKeysFromLeader(ctx, b.JS, stream, "dlg.acme.none.*", 10)
	require.NoError(t, err)
	require.Empty(t, keys)
}
