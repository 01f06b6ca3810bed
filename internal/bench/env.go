package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolwire/toolwire/internal/bus"
)

// env is one embedded JetStream server with a fresh store and the client
// connections opened on it.
type env struct {
	cfg   Config
	dir   string
	srv   *bus.Embedded
	conns []*nats.Conn
	// url is the listener's URL with the password of the bench user (every
	// permission); "" without a listener.
	url string
}

// benchUser is the listener's user with every permission.
const benchUser = "bench"

// startEnv starts a server whose store lives in a new temporary
// directory. close stops it and removes the directory.
func startEnv(ctx context.Context, cfg Config) (*env, error) {
	dir, err := os.MkdirTemp(cfg.TempDir, "toolwire-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: store directory: %w", err)
	}
	ec := bus.EmbeddedConfig{StoreDir: dir, ServerName: "toolwire-bench"}
	if cfg.Sync == "always" {
		ec.SyncAlways = true
	} else if d, err := time.ParseDuration(cfg.Sync); err == nil {
		ec.SyncInterval = d
	}
	password := rand.Text()
	if cfg.Conn == "tcp" {
		ec.ListenAddr = "127.0.0.1:0"
		ec.Users = []bus.User{{Name: benchUser, Password: password}}
	}
	srv, err := bus.StartEmbedded(ctx, ec)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	return &env{cfg: cfg, dir: dir, srv: srv, url: srv.ClientURLWithPassword(benchUser, password)}, nil
}

// connect opens a client connection of the configured kind; close closes
// it.
func (e *env) connect(name string) (*nats.Conn, error) {
	var nc *nats.Conn
	var err error
	if e.cfg.Conn == "tcp" {
		nc, err = bus.Dial(bus.ConnConfig{URL: e.url, Name: name})
	} else {
		nc, err = e.srv.Connect(name)
	}
	if err != nil {
		return nil, err
	}
	e.conns = append(e.conns, nc)
	return nc, nil
}

// close closes every connection, stops the server and removes its store.
func (e *env) close() error {
	for _, nc := range e.conns {
		nc.Close()
	}
	e.srv.Shutdown()
	return os.RemoveAll(e.dir)
}
