package archive_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/archive"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/logtest"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A bus whose calls stream keeps a window of a few seconds.
func shortWindow(window time.Duration) bus.Config {
	return bus.Config{CallsMaxAge: window, ResultsMaxAge: 3 * time.Minute, DuplicateWindow: time.Second, IdempotencyTTL: time.Second, EventsMaxAge: window}
}

func publishCalls(t *testing.T, b *bus.Bus, n int) {
	t.Helper()
	for i := range n {
		subject := b.Subjects.Call(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, "acme", "p", fmt.Sprintf("t%d", i))
		_, err := b.JS.Publish(context.Background(), subject, fmt.Appendf(nil, "call %d", i))
		require.NoError(t, err)
	}
}

func startArchiver(t *testing.T, cfg archive.Config) *archive.Archiver {
	t.Helper()
	a := archive.New(cfg)
	require.NoError(t, a.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, a.Stop(context.Background())) })
	return a
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond) // polling with a deadline, not synchronisation
	}
}

// The archiver seals closed periods, JetStream drops them once older
// than the window, and the archive holds every message, chain verified.
func TestArchiverArchivesBeforeTheWindowDrops(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bustest.Start(t, shortWindow(3*time.Second))
	store, err := archive.OpenBucket(ctx, t.TempDir())
	require.NoError(t, err)
	defer store.Close()
	// HoldAhead above the window: a message is held from the first pass
	// that sees it until it is archived, however slow the machine; then
	// the window drops it.
	startArchiver(t, archive.Config{Bus: env.Bus, Store: store, Name: "d1", Segment: time.Second, Settle: 100 * time.Millisecond,
		Every: 100 * time.Millisecond, HoldAhead: time.Minute})
	const n = 50
	publishCalls(t, env.Bus, n)
	calls := env.Bus.Config.CallsStream()
	waitFor(t, "the window to drop every call", func() bool {
		info, err := env.Bus.Calls.Info(ctx)
		return err == nil && info.State.Msgs == 0 && info.State.FirstSeq > n
	})

	rep, err := archive.Verify(ctx, store, calls, archive.VerifyOptions{Trusted: func(s string) bool { return s == env.Bus.Signer.Public() }})
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep.Problems)
	require.Equal(t, n, rep.Messages)
	require.Zero(t, rep.Missing)
	var got int
	require.NoError(t, archive.NewReader(store).Each(ctx, calls, archive.Query{}, func(m *archive.Message) bool {
		require.Equal(t, fmt.Sprintf("call %d", got), string(m.Data))
		got++
		return true
	}))
	require.Equal(t, n, got)

	kv, err := env.Bus.JS.KeyValue(ctx, archive.Bucket(env.Bus.Config.Prefix))
	require.NoError(t, err)
	p, err := archive.ReadProgress(ctx, kv, calls)
	require.NoError(t, err)
	require.Equal(t, uint64(n), p[calls].ToSeq)
}

// An archiver that cannot seal (its period never closes) holds the
// stream's MaxAge over what it has not archived: JetStream keeps it past
// the window, also when a dispatcher ensures the layout again.
func TestArchiverHoldsWhatIsNotArchived(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const window = 3 * time.Second
	env := bustest.Start(t, shortWindow(window))
	store, err := archive.OpenBucket(ctx, "mem://")
	require.NoError(t, err)
	defer store.Close()
	// HoldAhead above the window: the first pass that sees a message
	// holds it, whatever the machine's speed.
	a := startArchiver(t, archive.Config{Bus: env.Bus, Store: store, Name: "d1", Segment: time.Hour,
		Every: 100 * time.Millisecond, HoldAhead: time.Minute})
	publishCalls(t, env.Bus, 5)
	published := time.Now()
	calls := env.Bus.Config.CallsStream()
	waitFor(t, "the hold", func() bool { return a.Progress()[calls].HeldMaxAge > 0 })
	waitFor(t, "twice the window", func() bool { return time.Since(published) > 2*window })
	// A dispatcher starting meanwhile keeps the hold.
	again := env.Open(t, "d2")
	info, err := again.Calls.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(5), info.State.Msgs)
	require.Greater(t, info.Config.MaxAge, window)
	require.Contains(t, info.Config.Metadata, bus.ArchiveHoldMetadata)
}

// Two archivers on one installation: one leads, and the chain has one
// writer.
func TestOneArchiverLeads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bustest.Start(t, shortWindow(time.Minute))
	store, err := archive.OpenBucket(ctx, "mem://")
	require.NoError(t, err)
	defer store.Close()
	cfg := archive.Config{Bus: env.Bus, Store: store, Segment: time.Second, Settle: 50 * time.Millisecond, Every: 100 * time.Millisecond}
	cfg.Name = "d1"
	a1 := startArchiver(t, cfg)
	cfg.Bus, cfg.Name = env.Open(t, "d2"), "d2"
	a2 := startArchiver(t, cfg)
	publishCalls(t, env.Bus, 10)
	calls := env.Bus.Config.CallsStream()
	waitFor(t, "the calls archived", func() bool {
		return a1.Progress()[calls].ToSeq == 10 || a2.Progress()[calls].ToSeq == 10
	})
	require.True(t, len(a1.Progress()) == 0 || len(a2.Progress()) == 0, "both archivers led")
	rep, err := archive.Verify(ctx, store, calls, archive.VerifyOptions{})
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep.Problems)
}

// An archive store that is down is when a hold is needed most: the
// archiver holds the stream's MaxAge over what it could not archive, and
// JetStream keeps it past the window.
func TestArchiverHoldsWhileTheStoreIsDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const window = 3 * time.Second
	env := bustest.Start(t, shortWindow(window))
	store, err := archive.OpenBucket(ctx, "mem://")
	require.NoError(t, err)
	require.NoError(t, store.Close()) // every read and write fails
	// HoldAhead above the window: the first pass that sees a message
	// holds it, whatever the machine's speed.
	a := startArchiver(t, archive.Config{Bus: env.Bus, Store: store, Name: "d1", Every: 100 * time.Millisecond, HoldAhead: time.Minute,
		Logger: slog.New(slog.DiscardHandler)})
	publishCalls(t, env.Bus, 5)
	published := time.Now()
	calls := env.Bus.Config.CallsStream()
	waitFor(t, "the hold", func() bool { return a.Progress()[calls].HeldMaxAge > 0 })
	waitFor(t, "twice the window", func() bool { return time.Since(published) > 2*window })
	info, err := env.Bus.Calls.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(5), info.State.Msgs)
	require.Contains(t, info.Config.Metadata, bus.ArchiveHoldMetadata)
	require.Zero(t, a.Progress()[calls].ToSeq)
}

// A stream that kept a longer MaxAge when the archive was turned on (the
// layout never lowers it at open) gets its window from the archiver once
// every message older than that is archived: then JetStream drops them.
func TestArchiverLowersAKeptMaxAgeOnceArchived(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bustest.Start(t, bus.Config{}) // before the archive: 720h
	const n = 20
	publishCalls(t, env.Bus, n)
	nc, err := bus.Dial(bus.ConnConfig{URL: env.URL, Name: "archiving"})
	require.NoError(t, err)
	defer nc.Close()
	const window = 2 * time.Second
	b, err := bus.Open(ctx, nc, bus.Config{RetentionWindow: window, DuplicateWindow: time.Second}, bus.Options{Signer: env.Bus.Signer})
	require.NoError(t, err)
	info, err := b.Calls.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, 720*time.Hour, info.Config.MaxAge, "lowered at open")

	store, err := archive.OpenBucket(ctx, "mem://")
	require.NoError(t, err)
	defer store.Close()
	startArchiver(t, archive.Config{Bus: b, Store: store, Name: "d1", Segment: time.Second, Settle: 100 * time.Millisecond,
		Every: 100 * time.Millisecond, HoldAhead: time.Minute})
	waitFor(t, "the window to drop every archived call", func() bool {
		info, err := b.Calls.Info(ctx)
		return err == nil && info.Config.MaxAge == window && info.State.Msgs == 0 && info.State.FirstSeq > n
	})
	rep, err := archive.Verify(ctx, store, b.Config.CallsStream(), archive.VerifyOptions{})
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep.Problems)
	require.Equal(t, n, rep.Messages)
}

// A segment that takes longer to read and write than the lease lasts is
// sealed: the lease is renewed while the work goes on, not once a pass.
func TestArchiverSealsASegmentLongerThanTheLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bustest.Start(t, shortWindow(time.Hour))
	// 48 MiB of incompressible calls in one period: reading, encoding
	// and compressing them takes longer than the 750ms the lease is
	// counted on after a renewal.
	const n, size = 1500, 32 << 10
	for i := range n {
		subject := env.Bus.Subjects.Call(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, "acme", "p", fmt.Sprintf("t%d", i))
		_, err := env.Bus.JS.Publish(ctx, subject, []byte(rand.Text()+strings.Repeat(rand.Text(), size/26)))
		require.NoError(t, err)
	}
	store, err := archive.OpenBucket(ctx, "mem://")
	require.NoError(t, err)
	defer store.Close()
	a := startArchiver(t, archive.Config{Bus: env.Bus, Store: store, Name: "d1", Segment: 3 * time.Second, Settle: 100 * time.Millisecond,
		Every: 500 * time.Millisecond, LeaseTTL: time.Second, HoldAhead: time.Hour})
	calls := env.Bus.Config.CallsStream()
	waitFor(t, "every call archived", func() bool { return a.Progress()[calls].ToSeq == n })
}

// The hold's mark is renewed every pass while the hold is needed, also
// when the stream's MaxAge already covers the unarchived messages (a
// longer MaxAge kept when the archive was turned on): it never lapses
// while the archive is behind.
func TestArchiverRenewsTheHoldMark(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bustest.Start(t, bus.Config{}) // before the archive: 720h
	publishCalls(t, env.Bus, 5)
	nc, err := bus.Dial(bus.ConnConfig{URL: env.URL, Name: "archiving"})
	require.NoError(t, err)
	defer nc.Close()
	b, err := bus.Open(ctx, nc, bus.Config{RetentionWindow: time.Second, DuplicateWindow: time.Second}, bus.Options{Signer: env.Bus.Signer})
	require.NoError(t, err)
	store, err := archive.OpenBucket(ctx, "mem://")
	require.NoError(t, err)
	defer store.Close()
	const ahead = 3 * time.Second // above twice the window: held from the first pass
	a := startArchiver(t, archive.Config{Bus: b, Store: store, Name: "d1", Segment: time.Hour, Every: 100 * time.Millisecond, HoldAhead: ahead})
	calls := b.Config.CallsStream()
	waitFor(t, "the hold", func() bool { return a.Progress()[calls].HeldMaxAge > 0 })
	first := time.Now()
	waitFor(t, "the first mark's end", func() bool { return time.Since(first) > ahead+time.Second })
	info, err := b.Calls.Info(ctx)
	require.NoError(t, err)
	until, err := time.Parse(time.RFC3339, info.Config.Metadata[bus.ArchiveHoldMetadata])
	require.NoError(t, err)
	require.True(t, time.Now().Before(until), "the mark lapsed at %s", until)
	require.Equal(t, 720*time.Hour, info.Config.MaxAge)
	require.Equal(t, uint64(5), info.State.Msgs)
}

// A directory store suits one replica: a replica that finds another one
// archiving says so.
func TestDirectoryStoreWithReplicasIsWarned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := bustest.Start(t, shortWindow(time.Minute))
	store, err := archive.OpenBucket(ctx, t.TempDir())
	require.NoError(t, err)
	defer store.Close()
	var logs [2]logtest.Buffer
	cfg := archive.Config{Bus: env.Bus, Store: store, Every: 100 * time.Millisecond, Name: "d1", Logger: logs[0].JSONLogger()}
	startArchiver(t, cfg)
	cfg.Bus, cfg.Name, cfg.Logger = env.Open(t, "d2"), "d2", logs[1].JSONLogger()
	startArchiver(t, cfg)
	waitFor(t, "the warning", func() bool {
		return strings.Contains(logs[0].String()+logs[1].String(), "another dispatcher replica archives")
	})
}

// HoldAhead scales down with a short window, so the hold is for when the
// archive is behind, never for good.
func TestHoldAheadFollowsTheWindow(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ window, ahead time.Duration }{{168 * time.Hour, 6 * time.Hour}, {4 * time.Hour, time.Hour}} {
		b := &bus.Bus{Config: bus.Config{RetentionWindow: c.window}.WithDefaults()}
		require.Equal(t, c.ahead, archive.Config{Bus: b}.WithDefaults().HoldAhead, c.window)
	}
}
