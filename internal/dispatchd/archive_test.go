package dispatchd_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/dispatchd"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Turning --archive on (or shortening --retention-window) drops nothing
// at the start: the live streams keep their longer MaxAge until the
// archiver has archived past the window, and no other store's age
// follows the window (sessions, retries, dead letters, blobs).
func TestArchiveOnKeepsTheLiveHistoryAtStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	env := bustest.Start(t, bus.Config{}) // an installation before --archive: 720h
	for i := range 5 {
		subject := env.Bus.Subjects.Call(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, "acme", "p", fmt.Sprintf("t%d", i))
		_, err := env.Bus.JS.Publish(ctx, subject, []byte("call"))
		require.NoError(t, err)
	}
	rc := dispatchd.RunConfig{Archive: t.TempDir(), RetentionWindow: 4 * time.Hour}.WithDefaults()
	require.NoError(t, rc.Validate())
	nc, err := bus.Dial(bus.ConnConfig{URL: env.URL, Name: "archiving"})
	require.NoError(t, err)
	defer nc.Close()
	b, err := bus.Open(ctx, nc, rc.Bus, bus.Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)

	const before = 720 * time.Hour
	for _, s := range []struct {
		name string
		age  time.Duration
	}{{env.Bus.Config.CallsStream(), before}, {env.Bus.Config.ResultsStream(), before}, {env.Bus.Config.EventsStream(), 72 * time.Hour},
		{env.Bus.Config.DLQStream(), before}, {env.Bus.Config.RetriesStream(), before}} {
		st, err := b.JS.Stream(ctx, s.name)
		require.NoError(t, err)
		require.Equal(t, s.age, st.CachedInfo().Config.MaxAge, s.name)
	}
	info, err := b.Calls.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(5), info.State.Msgs)
	sessions, err := b.Sessions.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, before, sessions.TTL())
	blobs, err := b.Blobs.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, before, blobs.TTL())
}

// A retention window must leave room for the archive's normal lag (about
// a segment): a shorter one would hold the streams for good.
func TestRetentionWindowFitsTheArchiveLag(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		window time.Duration
		ok     bool
	}{{0, true}, {4 * time.Hour, true}, {2 * time.Hour, false}, {10 * time.Minute, false}} {
		err := dispatchd.RunConfig{Archive: t.TempDir(), RetentionWindow: c.window}.WithDefaults().Validate()
		if c.ok {
			require.NoError(t, err, c.window)
		} else {
			require.ErrorContains(t, err, "below 4 × the archive segment", c.window)
		}
	}
}
