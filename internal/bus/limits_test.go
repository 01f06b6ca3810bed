package bus_test

import (
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/logtest"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Every stream and bucket of the layout has a byte limit, and the age
// limit Stores states; no stream of the account is left out of Stores.
func TestEveryStoreIsBounded(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx := t.Context()
	stores := env.Bus.Config.Stores()
	want := map[string]bus.Store{}
	for _, s := range stores {
		want[s.Stream] = s
	}
	seen := 0
	l := env.Bus.JS.ListStreams(ctx)
	for info := range l.Info() {
		s, ok := want[info.Config.Name]
		require.True(t, ok, "stream %s is not in Stores", info.Config.Name)
		seen++
		require.Positive(t, info.Config.MaxBytes, "stream %s has no byte limit", info.Config.Name)
		require.Equal(t, s.MaxBytes, info.Config.MaxBytes, s.Name)
		require.Equal(t, s.MaxAge, info.Config.MaxAge, s.Name)
		require.Equal(t, s.DiscardNew, info.Config.Discard == jetstream.DiscardNew, s.Name)
	}
	require.NoError(t, l.Err())
	require.Equal(t, len(stores), seen, "every store exists")
	require.Equal(t, int64(8<<30), env.Bus.Config.ReservedBytes(), "the defaults reserve 8 GiB")
	require.Len(t, bus.StoreNames(), len(stores))
}

// A limit set by name reaches its stream.
func TestStoreLimitsAreConfigurable(t *testing.T) {
	t.Parallel()
	var cfg bus.Config
	require.NoError(t, cfg.ParseMaxBytes("results=3MiB, blobs=1GiB,events=-1"))
	require.ErrorContains(t, cfg.ParseMaxBytes("nope=1KiB"), `no store "nope"`)
	require.ErrorContains(t, cfg.ParseMaxBytes("results"), "store=size")
	require.ErrorContains(t, cfg.ParseMaxBytes("results=1GB"), "KiB, MiB, GiB or TiB")
	require.ErrorContains(t, cfg.ParseMaxBytes("results=0"), "positive")
	env := bustest.Start(t, cfg)
	info, err := env.Bus.Results.Info(t.Context())
	require.NoError(t, err)
	require.Equal(t, int64(3<<20), info.Config.MaxBytes)
	info, err = env.Bus.Events.Info(t.Context())
	require.NoError(t, err)
	require.Equal(t, int64(-1), info.Config.MaxBytes, "-1 is unbounded, on purpose")
	require.Equal(t, "3MiB", bus.FormatBytes(3<<20))
	require.Equal(t, "1000", bus.FormatBytes(1000))
}

// A server without room for the layout's limits is refused with what to
// change, not a bare error code.
func TestLayoutTooLargeForTheServerSaysWhatToChange(t *testing.T) {
	t.Parallel()
	srv, err := bus.StartEmbedded(t.Context(), bus.EmbeddedConfig{StoreDir: t.TempDir(), MaxStore: 1 << 30})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect("test")
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	_, err = bus.Open(t.Context(), nc, bus.Config{}, bus.Options{})
	require.True(t, bus.IsStorageExhausted(err), "got %v", err)
	require.ErrorContains(t, err, "reserves 8GiB")
	require.ErrorContains(t, err, "--stream-max-bytes")
}

// An operator's edit on the server is put back by the configuration, and
// never silently: every setting changed is logged with both values.
func TestLiveSettingsThatDifferAreLogged(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx := t.Context()
	_, err := env.Bus.EnsurePool(ctx, bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE})
	require.NoError(t, err)

	// The operator edits a stream, a bucket and a pool consumer.
	info, err := env.Bus.Results.Info(ctx)
	require.NoError(t, err)
	edited := info.Config
	edited.MaxBytes, edited.MaxAge = 1<<20, time.Hour
	_, err = env.Bus.JS.UpdateStream(ctx, edited)
	require.NoError(t, err)
	kv, err := env.Bus.JS.Stream(ctx, "KV_toolwire_idempotency")
	require.NoError(t, err)
	kvCfg := kv.CachedInfo().Config
	kvCfg.MaxBytes = 4 << 20
	_, err = env.Bus.JS.UpdateStream(ctx, kvCfg)
	require.NoError(t, err)
	pool, err := env.Bus.Calls.Consumer(ctx, "toolwire_pool_native")
	require.NoError(t, err)
	poolCfg := pool.CachedInfo().Config
	poolCfg.MaxAckPending = 7
	_, err = env.Bus.Calls.UpdateConsumer(ctx, poolCfg)
	require.NoError(t, err)

	// The next start applies the configuration and says what it changed.
	logs := &logtest.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	nc, err := bus.Dial(bus.ConnConfig{URL: env.URL, Name: "restart"})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	b, err := bus.Open(ctx, nc, bus.Config{}, bus.Options{Logger: log})
	require.NoError(t, err)
	_, err = b.EnsurePool(ctx, bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE})
	require.NoError(t, err)
	out := logs.String()
	require.Contains(t, out, "stream=TOOLWIRE_RESULTS")
	require.Contains(t, out, "max_bytes: 1048576 → 2147483648")
	require.Contains(t, out, "max_age: 1h0m0s → 720h0m0s")
	require.Contains(t, out, "stream=KV_toolwire_idempotency")
	require.Contains(t, out, "max_bytes: 4194304 → 134217728")
	require.Contains(t, out, "consumer=toolwire_pool_native")
	require.Contains(t, out, "max_ack_pending: 7 → 1024")
	require.Contains(t, out, "the configuration is applied")
	require.NotContains(t, out, "TOOLWIRE_CALLS", "unchanged stores are not logged")
	info, err = b.Results.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2<<30), info.Config.MaxBytes, "the configuration wins")

	// Nothing differs now: nothing is logged.
	logs.Reset()
	_, err = bus.Open(ctx, nc, bus.Config{}, bus.Options{Logger: log})
	require.NoError(t, err)
	_, err = b.EnsurePool(ctx, bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE})
	require.NoError(t, err)
	require.Empty(t, logs.String())
}

// An installation from before the revocations bucket and the delegation
// stream (blobs 288 + 32 MiB, neither store) upgrades on a server whose
// max_file_store is exactly the 8 GiB the layout reserves: the blobs
// store shrinks before the new stores take their shares.
func TestUpgradeFitsAServerWithExactlyTheReservation(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv, err := bus.StartEmbedded(ctx, bus.EmbeddedConfig{StoreDir: t.TempDir(), MaxStore: 8 << 30})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect("test")
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	b, err := bus.Open(ctx, nc, bus.Config{}, bus.Options{})
	require.NoError(t, err)

	// The old layout: no revocations bucket nor delegation stream, their
	// bytes in blobs.
	require.NoError(t, b.JS.DeleteKeyValue(ctx, b.Config.RevocationsBucket()))
	require.NoError(t, b.JS.DeleteStream(ctx, b.Config.DelegationStream()))
	blobs, err := b.JS.Stream(ctx, "OBJ_"+b.Config.BlobBucket())
	require.NoError(t, err)
	old := blobs.CachedInfo().Config
	old.MaxBytes += b.Config.RevocationsMaxBytes + b.Config.DelegationMaxBytes
	_, err = b.JS.UpdateStream(ctx, old)
	require.NoError(t, err)

	up, err := bus.Open(ctx, nc, bus.Config{}, bus.Options{})
	require.NoError(t, err, "the upgrade fits")
	info, err := up.JS.Stream(ctx, "OBJ_"+b.Config.BlobBucket())
	require.NoError(t, err)
	require.Equal(t, b.Config.BlobsMaxBytes, info.CachedInfo().Config.MaxBytes)
	require.NotNil(t, up.Revocations)
	require.NotNil(t, up.Delegation, "an upgraded layout gets the delegation stream")
	dinfo, err := up.Delegation.Info(ctx)
	require.NoError(t, err)
	require.True(t, dinfo.Config.AllowMsgCounter)
}

// An idempotency key lives as long as its call's record by default, and
// never longer; a shorter life reaches the bucket.
func TestIdempotencyKeysFollowTheCallsRetention(t *testing.T) {
	t.Parallel()
	c := bus.Config{CallsMaxAge: 48 * time.Hour}.WithDefaults()
	require.Equal(t, 48*time.Hour, c.IdempotencyTTL, "default: the calls' retention")
	require.ErrorContains(t, bus.Config{CallsMaxAge: time.Hour, IdempotencyTTL: 2 * time.Hour}.WithDefaults().Validate(),
		"IdempotencyTTL 2h0m0s must be positive and at most CallsMaxAge 1h0m0s")
	require.ErrorContains(t, bus.Config{IdempotencyTTL: -time.Second}.WithDefaults().Validate(), "IdempotencyTTL")
	require.ErrorContains(t, bus.Config{IdempotencyTTL: time.Minute}.WithDefaults().Validate(),
		"IdempotencyTTL 1m0s is below DuplicateWindow 10m0s", "a key outlives every publish of its call")
	require.NoError(t, bus.Config{IdempotencyTTL: time.Second, DuplicateWindow: time.Second}.WithDefaults().Validate())

	env := bustest.Start(t, bus.Config{IdempotencyTTL: 6 * time.Hour})
	st, err := env.Bus.Idempotency.Status(t.Context())
	require.NoError(t, err)
	require.Equal(t, 6*time.Hour, st.TTL())
	for _, s := range env.Bus.Config.Stores() {
		if s.Name == "idempotency" {
			require.Equal(t, 6*time.Hour, s.MaxAge)
		}
	}
}

// DesignRate sizes the stores every call writes, and the idempotency
// bucket, by their windows at that rate (an archived stream's window plus
// the archiver's 6 h hold, a quarter of headroom); a limit given stays,
// a rate too small for the default keeps it, and a store that does not
// scale with calls is not touched (issue 29: "stores are sized by the
// window").
func TestDesignRateSizesTheStoresByTheirWindows(t *testing.T) {
	t.Parallel()
	sized := func(rate, perCall float64, window time.Duration) int64 {
		b := int64(rate * perCall * window.Seconds() * 1.25)
		return (b + 1<<20 - 1) &^ (1<<20 - 1)
	}
	c := bus.Config{DesignRate: 60, RetentionWindow: 168 * time.Hour}.WithDefaults()
	require.NoError(t, c.Validate())
	require.Equal(t, sized(60, 512, 174*time.Hour), c.CallsMaxBytes)
	require.Equal(t, sized(60, 512, 174*time.Hour), c.ResultsMaxBytes)
	require.Equal(t, sized(60, 384, 78*time.Hour), c.EventsMaxBytes, "events keep at most 72h")
	require.Equal(t, sized(60, 400, 168*time.Hour), c.IdempotencyMaxBytes, "keys live as long as the window")
	require.Equal(t, int64(128<<20), c.DLQMaxBytes, "not a store every call writes")
	require.Equal(t, int64(5<<30), bus.Config{DesignRate: 60, CallsMaxBytes: 5 << 30}.WithDefaults().CallsMaxBytes, "a limit given")
	require.Equal(t, int64(4<<30), bus.Config{DesignRate: 0.001}.WithDefaults().CallsMaxBytes, "never below the default")
	require.Equal(t, int64(4<<30), bus.Config{}.WithDefaults().CallsMaxBytes)
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1), math.Inf(-1), bus.MaxDesignRate + 1} {
		require.ErrorContains(t, bus.Config{DesignRate: bad}.WithDefaults().Validate(), "DesignRate")
	}

	// On a server: the events stream as sized, the limits given as given.
	var cfg bus.Config
	require.NoError(t, cfg.ParseMaxBytes("calls=64MiB,results=64MiB,idempotency=64MiB"))
	cfg.DesignRate = 10
	env := bustest.Start(t, cfg)
	info, err := env.Bus.Events.Info(t.Context())
	require.NoError(t, err)
	require.Equal(t, sized(10, 384, 72*time.Hour), info.Config.MaxBytes)
	require.Greater(t, info.Config.MaxBytes, int64(1<<30), "above the fixed default")
	info, err = env.Bus.Calls.Info(t.Context())
	require.NoError(t, err)
	require.Equal(t, int64(64<<20), info.Config.MaxBytes)
}
