package approvals_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/approvals"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A worker's NATS credentials read approval records and nonces by key —
// enough for the re-check — and write nothing in the bucket.
func TestWorkerCredentialsReadButNeverWrite(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	env := bustest.StartWithRoles(t)
	srv, creds, b := env.Server, env.Creds, env.Bus
	store := approvals.NewStore(b, time.Hour)
	now := time.Now()
	r := newRecord("acme", "bot", "s1", "wipe", now)
	require.NoError(t, store.Park(ctx, r))
	approveRecord(r, now)
	require.NoError(t, store.Update(ctx, r))
	require.NoError(t, store.ConsumeNonce(ctx, "acme", r.Nonce, r.ID(), now.Add(time.Hour)))

	nc, err := bus.Dial(bus.ConnConfig{URL: srv.ClientURL(), Name: "worker", CredsFile: bus.CredentialsFile(creds.Dir, bus.RoleWorker),
		InboxPrefix: bus.InboxPrefix(b.Config, bus.RoleWorker)})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	wb, err := bus.Open(ctx, nc, bus.Config{}, bus.Options{Bind: true})
	require.NoError(t, err)
	call := &toolwirev1.ToolCall{CallId: r.ID(), Tool: "wipe", SpecVersion: "v1", Arguments: r.Call.Arguments,
		Caller: r.Call.Caller, ApprovalId: r.ID()}
	require.NoError(t, approvals.CheckCall(ctx, wb, &toolwirev1.ToolSpec{Name: "wipe", Version: "v1"}, call, now))

	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
	defer wcancel()
	_, err = wb.Approvals.Put(wctx, approvals.NonceKey("acme", approvals.NewNonce()), []byte(r.ID()))
	require.Error(t, err, "a worker may not mark a nonce used")
	_, err = wb.Approvals.Put(wctx, approvals.CallKey("acme", r.ID()), []byte("{}"))
	require.Error(t, err, "nor rewrite an approval")
}
