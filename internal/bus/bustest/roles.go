package bustest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/bus"
)

// RoleEnv is a running server whose loopback listener takes the role
// credentials a dispatcher writes (bus.EnsureCredentials: worker.nk,
// operator.nk), with the layout opened on an in-process connection that
// has every permission.
type RoleEnv struct {
	Server *bus.Embedded
	Bus    *bus.Bus
	// Creds are the roles' credentials; bus.CredentialsFile(Creds.Dir,
	// role) is the file a worker or toolctl dials with.
	Creds *bus.Credentials
}

// StartWithRoles starts a server with the roles' users, and the role of
// each of pools (bus.PoolRole), on a loopback listener and opens the
// layout with the defaults. Everything stops when the test ends.
func StartWithRoles(t testing.TB, pools ...string) *RoleEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	creds, _, err := bus.EnsureCredentials(filepath.Join(t.TempDir(), "credentials"), pools...)
	if err != nil {
		t.Fatalf("bustest: credentials: %v", err)
	}
	users, err := creds.Users(bus.Config{})
	if err != nil {
		t.Fatalf("bustest: users: %v", err)
	}
	srv, err := bus.StartEmbedded(ctx, bus.EmbeddedConfig{StoreDir: t.TempDir(), ListenAddr: "127.0.0.1:0", Users: users,
		SyncInterval: time.Minute})
	if err != nil {
		t.Fatalf("bustest: start server: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect("bustest")
	if err != nil {
		t.Fatalf("bustest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	b, err := bus.Open(ctx, nc, bus.Config{}, bus.Options{})
	if err != nil {
		t.Fatalf("bustest: open bus: %v", err)
	}
	return &RoleEnv{Server: srv, Bus: b, Creds: creds}
}
