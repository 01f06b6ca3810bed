package bustest

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/bus"
)

// Env is a running server, one connection and the bus on it.
type Env struct {
	Server *bus.Embedded
	Bus    *bus.Bus
	// URL is the loopback client URL, for worker processes and second
	// connections. It carries the password of a user with every
	// permission (the listener never accepts a client without
	// credentials): hand it to trusted test processes only.
	URL string
}

// User is the listener's user that URL authenticates as.
const User = "bustest"

// Start starts a server with a loopback listener and opens the layout with
// cfg (zero = defaults). Everything stops when the test ends.
func Start(t testing.TB, cfg bus.Config) *Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	password := rand.Text()
	srv, err := bus.StartEmbedded(ctx, bus.EmbeddedConfig{StoreDir: t.TempDir(), ListenAddr: "127.0.0.1:0", SyncInterval: time.Minute,
		Users: []bus.User{{Name: User, Password: password}}})
	if err != nil {
		t.Fatalf("bustest: start server: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect("bustest")
	if err != nil {
		t.Fatalf("bustest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	b, err := bus.Open(ctx, nc, cfg, bus.Options{})
	if err != nil {
		t.Fatalf("bustest: open bus: %v", err)
	}
	return &Env{Server: srv, Bus: b, URL: srv.ClientURLWithPassword(User, password)}
}

// Open opens a second Bus on a new connection to the same server, as
// another process would. It signs with the Env's Bus's key (the one a
// dispatcher on Env.Bus enrols as its own), so that the workers of a test
// are believed without an enrolment of their own; tests of signatures
// open their buses with keys of their own.
func (e *Env) Open(t testing.TB, name string) *bus.Bus {
	t.Helper()
	nc, err := bus.Dial(bus.ConnConfig{URL: e.URL, Name: name})
	if err != nil {
		t.Fatalf("bustest: dial: %v", err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := bus.Open(ctx, nc, e.Bus.Config, bus.Options{Signer: e.Bus.Signer})
	if err != nil {
		t.Fatalf("bustest: open bus: %v", err)
	}
	return b
}
