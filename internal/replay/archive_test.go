package replay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/archive"
	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/native"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/replay"
	"github.com/toolwire/toolwire/internal/worker"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// TestReplayOfAnArchivedCall: a call whose record left the live streams
// (the calls stream's window dropped it, its result was archived and
// deleted) is found in the archive and replayed like a live one.
func TestReplayOfAnArchivedCall(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{greet("hello")},
		Bus: bus.Config{CallsMaxAge: 4 * time.Second, ResultsMaxAge: 3 * time.Minute, EventsMaxAge: 4 * time.Second,
			DuplicateWindow: time.Second, IdempotencyTTL: time.Second},
		Dispatcher: dispatch.Config{PublishHorizon: 500 * time.Millisecond}})
	store, err := archive.OpenBucket(ctx, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	a := archive.New(archive.Config{Bus: s.Env.Bus, Store: store, Name: "d1", Segment: time.Second, Settle: 100 * time.Millisecond,
		Every: 100 * time.Millisecond, HoldAhead: time.Second})
	require.NoError(t, a.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, a.Stop(context.Background())) })

	r, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "greet", ArgumentsJson: `{"name":"Ada"}`}, 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.GetOk())
	b := s.Env.Bus
	ri, err := b.Results.Info(ctx)
	require.NoError(t, err)
	deadline := time.Now().Add(90 * time.Second)
	for {
		ci, err := b.Calls.Info(ctx)
		require.NoError(t, err)
		segs, err := archive.NewReader(store).Segments(ctx, b.Config.ResultsStream())
		require.NoError(t, err)
		if ci.State.Msgs == 0 && len(segs) > 0 && segs[len(segs)-1].ToSeq >= ri.State.LastSeq {
			break
		}
		require.True(t, time.Now().Before(deadline), "the call was not dropped, or its result not archived")
		time.Sleep(100 * time.Millisecond) // polling with a deadline, not synchronisation
	}
	for seq := ri.State.FirstSeq; seq <= ri.State.LastSeq; seq++ {
		if err := b.Results.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			require.NoError(t, err)
		}
	}

	nat, err := native.New(greet("hello"))
	require.NoError(t, err)
	w, err := worker.New(s.Env.Open(t, "shadow"), worker.Config{Shadow: true,
		Pools:     []worker.Pool{{PoolConfig: bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE}}},
		Executors: map[toolwirev1.ExecutorType]executors.Executor{toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE: nat},
		Specs:     nat.Specs()})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Stop(sctx)
	})

	src, err := audit.Open(ctx, b.NC, "toolwire")
	require.NoError(t, err)
	src.UseArchive(store)
	rp, err := replay.New(ctx, b.NC, "toolwire")
	require.NoError(t, err)
	var recs []*audit.Record
	_, err = src.Run(ctx, audit.Filter{CallID: r.CallId}, audit.Options{}, func(rec *audit.Record) error {
		recs = append(recs, rec)
		return nil
	})
	require.NoError(t, err)
	require.Len(t, recs, 1, "the archived call is not found")
	p := rp.Replay(ctx, recs[0], replay.Options{Wait: 20 * time.Second})
	require.Empty(t, p.Error)
	require.True(t, p.Equal, "%+v", p.Changes)
	require.Equal(t, r.CallId, p.CallID)
	require.NotEqual(t, r.CallId, p.ReplayCallID)
}
