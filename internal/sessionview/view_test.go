package sessionview_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/intents"
	"github.com/toolwire/toolwire/internal/sessionview"
	"github.com/toolwire/toolwire/internal/startstop"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

func setup(t *testing.T, maxSessions int) (*sessionview.View, *bus.Bus) {
	t.Helper()
	env := bustest.Start(t, bus.Config{})
	v, err := sessionview.New(sessionview.Config{Sessions: env.Bus.Sessions, MaxSessions: maxSessions})
	require.NoError(t, err)
	require.NoError(t, v.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, v.Stop(context.Background())) })
	return v, env.Bus
}

func put(t *testing.T, b *bus.Bus, session string, s *toolwirev1.Session) {
	t.Helper()
	data, err := proto.Marshal(s)
	require.NoError(t, err)
	_, err = b.Sessions.Put(t.Context(), intents.SessionKey("t1", session), data)
	require.NoError(t, err)
}

// A session never written is active and does not exist; one written
// before it was asked for is read from the bucket; one changed after it
// was cached (a cached miss included) is brought by the watch and exists;
// a deleted one is active again and exists no more.
func TestViewFollowsTheBucket(t *testing.T) {
	t.Parallel()
	v, b := setup(t, 0)
	ctx := t.Context()
	st, err := v.State(ctx, "t1", "fresh")
	require.NoError(t, err)
	require.Equal(t, sessionview.State{}, st)

	put(t, b, "s1", &toolwirev1.Session{Ended: true, EndReason: "bye", Mode: "voice"})
	st, err = v.State(ctx, "t1", "s1")
	require.NoError(t, err)
	require.Equal(t, sessionview.State{Exists: true, Ended: true, EndReason: "bye", Mode: "voice"}, st)

	put(t, b, "fresh", &toolwirev1.Session{}) // opened: no mode, not ended
	require.Eventually(t, func() bool {
		st, err := v.State(ctx, "t1", "fresh")
		return err == nil && st.Exists
	}, 10*time.Second, 5*time.Millisecond)

	require.NoError(t, b.Sessions.Delete(ctx, intents.SessionKey("t1", "s1")))
	require.Eventually(t, func() bool {
		st, err := v.State(ctx, "t1", "s1")
		return err == nil && !st.Ended && !st.Exists
	}, 10*time.Second, 5*time.Millisecond)

	// An undecodable session is an error, never a guess.
	_, err = b.Sessions.Put(ctx, intents.SessionKey("t1", "bad"), []byte{0xff, 0xff})
	require.NoError(t, err)
	_, err = v.State(ctx, "t1", "bad")
	require.Error(t, err)
}

// The cache never holds more than MaxSessions; an evicted session is read
// again, correctly.
func TestViewIsBounded(t *testing.T) {
	t.Parallel()
	v, b := setup(t, 4)
	put(t, b, "ended", &toolwirev1.Session{Ended: true})
	for _, s := range []string{"ended", "a", "b", "c", "d", "e", "f"} {
		_, err := v.State(t.Context(), "t1", s)
		require.NoError(t, err)
		require.LessOrEqual(t, v.Len(), 4)
	}
	st, err := v.State(t.Context(), "t1", "ended")
	require.NoError(t, err)
	require.True(t, st.Ended, "evicted or not, the state is the bucket's")
}

// A stopped View does not start again and reads the bucket every time.
func TestStoppedViewReads(t *testing.T) {
	t.Parallel()
	v, b := setup(t, 0)
	require.NoError(t, v.Stop(t.Context()))
	require.ErrorIs(t, v.Start(t.Context()), startstop.ErrStopped)
	put(t, b, "s", &toolwirev1.Session{Mode: "voice"})
	st, err := v.State(t.Context(), "t1", "s")
	require.NoError(t, err)
	require.Equal(t, "voice", st.Mode)
	require.Zero(t, v.Len())
}

// A session's pins are in its State; the pins cached over all sessions
// stay within MaxPins, and an evicted session is read again correctly.
func TestViewPins(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	v, err := sessionview.New(sessionview.Config{Sessions: env.Bus.Sessions, MaxPins: 3})
	require.NoError(t, err)
	require.NoError(t, v.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, v.Stop(context.Background())) })
	put(t, env.Bus, "a", &toolwirev1.Session{PinnedVersions: map[string]string{"echo": "v1", "grep": "v2"}})
	put(t, env.Bus, "b", &toolwirev1.Session{PinnedVersions: map[string]string{"echo": "v3", "grep": "v4"}})
	for _, c := range []struct{ session, echo string }{{"a", "v1"}, {"b", "v3"}, {"a", "v1"}} {
		st, err := v.State(t.Context(), "t1", c.session)
		require.NoError(t, err)
		pin, ok := st.Pinned("echo")
		require.True(t, ok)
		require.Equal(t, c.echo, pin)
		require.Equal(t, 1, v.Len(), "two sessions of two pins do not fit three pins")
	}
	st, err := v.State(t.Context(), "t1", "none")
	require.NoError(t, err)
	_, ok := st.Pinned("echo")
	require.False(t, ok)
}

// A View whose connection was closed under it (a killed dispatcher's)
// still ends its watch on Stop: nothing of it is left running (goleak,
// TestMain).
func TestStopAfterTheConnectionClosed(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	nc, err := nats.Connect(env.URL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	kv, err := js.KeyValue(t.Context(), env.Bus.Sessions.Bucket())
	require.NoError(t, err)
	v, err := sessionview.New(sessionview.Config{Sessions: kv})
	require.NoError(t, err)
	require.NoError(t, v.Start(t.Context()))
	nc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, v.Stop(ctx))
}

// A watch that ends without Stop (its subscription closed under it) is
// noticed: the cache, which nothing keeps current any more, is emptied,
// State reads the bucket (a session changed meanwhile is seen changed),
// and a new watch replaces the lost one. Before, the cache went on
// answering what it held.
func TestLostWatchIsNoticedAndReplaced(t *testing.T) {
	sessionview.SetRewatchEvery(0)
	t.Cleanup(func() { sessionview.SetRewatchEvery(5 * time.Second) })
	v, b := setup(t, 0)
	ctx := t.Context()
	put(t, b, "s1", &toolwirev1.Session{Mode: "voice"})
	st, err := v.State(ctx, "t1", "s1")
	require.NoError(t, err)
	require.Equal(t, "voice", st.Mode)

	v.DropWatch()
	require.Eventually(t, func() bool { return !v.Watching() && v.Len() == 0 }, 10*time.Second, 5*time.Millisecond,
		"the lost watch is noticed and the cache emptied")
	put(t, b, "s1", &toolwirev1.Session{Mode: "text"})
	st, err = v.State(ctx, "t1", "s1")
	require.NoError(t, err)
	require.Equal(t, "text", st.Mode, "read from the bucket, not an answer kept from before")
	require.Eventually(t, v.Watching, 10*time.Second, 5*time.Millisecond, "a new watch replaced the lost one (in the background)")

	// The new watch keeps the cache current again.
	put(t, b, "s1", &toolwirev1.Session{Mode: "voice", Ended: true})
	require.Eventually(t, func() bool {
		st, err := v.State(ctx, "t1", "s1")
		return err == nil && st.Ended
	}, 10*time.Second, 5*time.Millisecond)
}
