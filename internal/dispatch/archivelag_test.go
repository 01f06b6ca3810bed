package dispatch_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/archive"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The one storage refusal in steady state: while a stream's oldest
// unarchived message comes within the margin of the stream's MaxAge (so
// JetStream would soon drop what no archive holds), a dispatcher with an
// archive store refuses new calls OVERLOADED with retry_after — keyed
// ones before their key is claimed, writing nothing — counts them, and
// exports the lag; once the archive has caught up (or holds the stream),
// calls are taken again. The streams keep the retention window
// (bus.Config.RetentionWindow, as dispatchd sets it), and the archiver
// that leads is gone without giving up its lease: nothing archives or
// holds until the lease is free and the dispatcher's own takes over.
func TestArchiveBehindRefusesNewCalls(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const window = 2 * time.Second
	s, d, kv, reg := archiveBehindStack(t, bus.Config{RetentionWindow: window})
	echo := func(key string) *toolwirev1.CallRequest {
		return &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`, IdempotencyKey: key}
	}
	first, err := d.Submit(ctx, identity.Default, echo(""))
	require.NoError(t, err)
	require.Nil(t, first.Rejected, "caught up: taken")

	var refused *toolwirev1.ToolResponse
	pollSubmit(t, func() bool {
		sub, err := d.Submit(ctx, identity.Default, echo(""))
		require.NoError(t, err, "a lagging archive is never an error")
		refused = sub.Rejected
		return refused != nil
	}, "the archive's lag to come near the window and refuse")
	requireOverloaded(t, refused, "the archive is behind")
	require.Equal(t, 30*time.Second, refused.Error.RetryAfter.AsDuration())
	require.Positive(t, metricSum(t, reg, "toolwire_dispatcher_overload_refusals_total", map[string]string{"cause": "archive_behind"}))
	require.Positive(t, metricSum(t, reg, "toolwire_archive_lag_seconds", nil))

	keys := keysStored(ctx, t, s)
	keyedSub, err := d.Submit(ctx, identity.Default, echo("refused-key"))
	require.NoError(t, err)
	requireOverloaded(t, keyedSub.Rejected, "the archive is behind")
	require.Equal(t, keys, keysStored(ctx, t, s), "a keyed call refused claims no key")

	require.NoError(t, kv.Delete(ctx, "leader")) // the lease is free: the dispatcher's archiver leads
	pollSubmit(t, func() bool {
		sub, err := d.Submit(ctx, identity.Default, echo(""))
		require.NoError(t, err)
		return sub.Rejected == nil
	}, "the archive to catch up and calls to be taken again")
	requireEventually(t, func() bool {
		return metricSum(t, reg, "toolwire_archive_lag_seconds", nil) < window.Seconds()
	}, "the lag to fall")
}

// Turning the archive on for an existing install: the streams keep the
// longer MaxAge they had (no hold mark) until the archiver has archived
// past the window, and their oldest messages are far older than the
// window. That is no reason to refuse: nothing drops that did not drop
// before. Here no archiver runs at all (its leader is gone), so the
// streams stay as they were; calls are taken however far past the
// window the lag goes.
func TestArchiveTurnedOnTakesCalls(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const window = time.Second
	s := dispatchtest.Start(t, dispatchtest.Options{Bus: bus.Config{RetentionWindow: window,
		DuplicateWindow: time.Second, IdempotencyTTL: time.Second}, Dispatcher: dispatch.Config{PublishHorizon: 400 * time.Millisecond}})
	store, err := archive.OpenBucket(ctx, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	goneLeader(ctx, t, s)
	c := s.Env.Bus.Config
	for _, name := range []string{c.CallsStream(), c.ResultsStream(), c.EventsStream()} {
		st, err := s.Env.Bus.JS.Stream(ctx, name)
		require.NoError(t, err)
		cfg := st.CachedInfo().Config
		cfg.MaxAge = time.Hour // what the install kept before the archive
		_, err = s.Env.Bus.JS.UpdateStream(ctx, cfg)
		require.NoError(t, err)
	}

	cfg, reg := withMetrics(t, dispatch.Config{Archive: store, PublishHorizon: 400 * time.Millisecond})
	d := s.StartDispatcher(t, cfg)
	sub, err := d.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`})
	require.NoError(t, err)
	require.Nil(t, sub.Rejected)
	requireEventually(t, func() bool {
		return metricSum(t, reg, "toolwire_archive_lag_seconds", map[string]string{"stream": c.CallsStream()}) > 3*window.Seconds()
	}, "the lag to pass the window and its tenth")
	sub, err = d.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`})
	require.NoError(t, err)
	require.Nil(t, sub.Rejected, "a stream that keeps its history as before is no reason to refuse")
	require.Zero(t, metricSum(t, reg, "toolwire_dispatcher_overload_refusals_total", map[string]string{"cause": "archive_behind"}))
}

// goneLeader makes the archive bucket and names in it an archiver that
// holds the lease for an hour and is gone: no archiver of the test's
// archives or holds a stream until the key is deleted.
func goneLeader(ctx context.Context, t *testing.T, s *dispatchtest.Stack) jetstream.KeyValue {
	t.Helper()
	kv, err := s.Env.Bus.JS.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: archive.Bucket(s.Env.Bus.Config.Prefix), Description: "toolwire archiver: lease and progress",
		History: 1, MaxValueSize: 4096, Storage: jetstream.FileStorage, Replicas: s.Env.Bus.Config.Replicas,
	})
	require.NoError(t, err)
	b, err := json.Marshal(map[string]any{"holder": "gone", "until": time.Now().Add(time.Hour)})
	require.NoError(t, err)
	_, err = kv.Put(ctx, "leader", b)
	require.NoError(t, err)
	return kv
}

// archiveBehindStack starts a stack on c (with short duplicate and key
// windows) whose archiver's leader is gone without giving up its lease
// (kv: the archive bucket; delete "leader" to let the dispatcher's own
// lead), and a dispatcher archiving into a directory store, with its
// metrics.
func archiveBehindStack(t *testing.T, c bus.Config) (*dispatchtest.Stack, *dispatch.Dispatcher, jetstream.KeyValue, *prometheus.Registry) {
	t.Helper()
	ctx := t.Context()
	c.DuplicateWindow, c.IdempotencyTTL = time.Second, time.Second
	s := dispatchtest.Start(t, dispatchtest.Options{Bus: c, Dispatcher: dispatch.Config{PublishHorizon: 400 * time.Millisecond}})
	store, err := archive.OpenBucket(ctx, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	kv := goneLeader(ctx, t, s)
	cfg, reg := withMetrics(t, dispatch.Config{Archive: store, ArchiveSegment: time.Second, ArchiveSettle: 100 * time.Millisecond,
		ArchiveEvery: 100 * time.Millisecond, PublishHorizon: 400 * time.Millisecond})
	return s, s.StartDispatcher(t, cfg), kv, reg
}

// pollSubmit calls try every 100ms until it reports true, failing after
// 60s (a loaded machine). It runs try on the test's goroutine (unlike
// require.Eventually's condition), so try may set the test's variables
// and call require.
func pollSubmit(t *testing.T, try func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !try() {
		require.True(t, time.Now().Before(deadline), "timed out waiting for %s", what)
		time.Sleep(100 * time.Millisecond) // polling with a deadline, not synchronisation
	}
}

// A stream that drops its oldest messages at its byte limit (results,
// events) drops what no archive holds once it is full and its oldest
// message is not archived, however young that message is: a dispatcher
// with an archive store refuses new calls OVERLOADED then too, and takes
// them again once the archive holds the stream's oldest message. Here
// the window is an hour (the age bound is far off) and the results
// stream is filled past the high-water mark while no archiver runs.
func TestArchiveBehindAFullStreamRefusesNewCalls(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, d, kv, reg := archiveBehindStack(t, bus.Config{RetentionWindow: time.Hour, ResultsMaxBytes: 1 << 20})
	echo := &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`}
	first, err := d.Submit(ctx, identity.Default, echo)
	require.NoError(t, err)
	require.Nil(t, first.Rejected, "not full: taken")

	// 950 KiB on one call's result subject: stored, never believed.
	subject := s.Env.Bus.Subjects.Result(identity.Default.Tenant, "filler", "filler-call")
	for range 950 {
		_, err := s.Env.Bus.JS.PublishAsync(subject, make([]byte, 1<<10))
		require.NoError(t, err)
	}
	select {
	case <-s.Env.Bus.JS.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}

	var refused *toolwirev1.ToolResponse
	pollSubmit(t, func() bool {
		sub, err := d.Submit(ctx, identity.Default, echo)
		require.NoError(t, err)
		refused = sub.Rejected
		return refused != nil
	}, "a full results stream whose oldest message is unarchived to refuse")
	requireOverloaded(t, refused, "the archive is behind")
	require.Contains(t, refused.Error.Message, "is not archived")
	require.Positive(t, metricSum(t, reg, "toolwire_dispatcher_overload_refusals_total", map[string]string{"cause": "archive_behind"}))

	require.NoError(t, kv.Delete(ctx, "leader")) // the dispatcher's archiver leads and archives the stream's oldest
	pollSubmit(t, func() bool {
		sub, err := d.Submit(ctx, identity.Default, echo)
		require.NoError(t, err)
		return sub.Rejected == nil
	}, "the archive to hold the oldest message and calls to be taken again")
}
