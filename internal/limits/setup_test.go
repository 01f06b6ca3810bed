package limits_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/limits"
)

const bucket = "test_limits"

// env is a real embedded JetStream server with the limits bucket; every
// store opened on it has a connection of its own, as another dispatcher
// replica would.
type env struct {
	srv *bus.Embedded
	url string // loopback, with a password
	js  jetstream.JetStream
}

func setup(t testing.TB) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	password := rand.Text()
	srv, err := bus.StartEmbedded(ctx, bus.EmbeddedConfig{StoreDir: t.TempDir(), ListenAddr: "127.0.0.1:0",
		MaxStore: 1 << 30, SyncInterval: time.Minute, Users: []bus.User{{Name: "limits", Password: password}}})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect("limits-setup")
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = limits.EnsureBucket(ctx, js, limits.BucketConfig{Name: bucket})
	require.NoError(t, err)
	return &env{srv: srv, url: srv.ClientURLWithPassword("limits", password), js: js}
}

// store opens a Store on a new loopback connection.
func (e *env) store(t testing.TB, cfg limits.Config) *limits.Store {
	t.Helper()
	nc, err := bus.Dial(bus.ConnConfig{URL: e.url, Name: t.Name()})
	require.NoError(t, err)
	return e.storeOn(t, nc, cfg)
}

// inProcess opens a Store on a new in-process connection (no TCP: what an
// embedded dispatcher uses).
func (e *env) inProcess(t testing.TB, cfg limits.Config) *limits.Store {
	t.Helper()
	nc, err := e.srv.Connect(t.Name())
	require.NoError(t, err)
	return e.storeOn(t, nc, cfg)
}

func (e *env) storeOn(t testing.TB, nc *nats.Conn, cfg limits.Config) *limits.Store {
	t.Helper()
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	cfg.Bucket = bucket
	s, err := limits.New(t.Context(), js, cfg)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// key returns a key of its own for each test.
func key(t testing.TB, value string) limits.Key {
	return limits.Key{Tenant: "acme", Limit: "l-" + rand.Text()[:8], Value: value}
}
