package toolctl_test

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/archive"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/toolctl"
)

// `audit --rejected --archive DIR` reports the calls admission refused
// whose REJECTED events aged out of the events stream (a window of a few
// seconds here) from the archive, before the ones the stream still
// holds; without --archive only the latter are reported.
func TestAuditRejectedReadsTheArchive(t *testing.T) {
	t.Parallel()
	const window = 4 * time.Second
	b := setup(t, dispatchtest.Options{Bus: bus.Config{CallsMaxAge: window, ResultsMaxAge: 3 * time.Minute, EventsMaxAge: window,
		DuplicateWindow: time.Second, IdempotencyTTL: time.Second}, Dispatcher: dispatch.Config{PublishHorizon: 500 * time.Millisecond}})
	dir := t.TempDir()
	store, err := archive.OpenBucket(t.Context(), dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	a := archive.New(archive.Config{Bus: b.stack.Env.Bus, Store: store, Name: "d1", Segment: time.Second, Settle: 100 * time.Millisecond,
		Every: 100 * time.Millisecond, HoldAhead: time.Second})
	require.NoError(t, a.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, a.Stop(context.Background())) })

	refuse := func() string {
		out := b.run(t, "-o", "json", "submit", "echo", `{"text":1}`)
		require.Equal(t, toolctl.ExitToolError, out.code, out.stderr)
		var sub struct {
			CallID string `json:"callId"`
		}
		require.NoError(t, json.Unmarshal([]byte(out.stdout), &sub))
		require.NotEmpty(t, sub.CallID, out.stdout)
		return sub.CallID
	}
	want := []string{refuse(), refuse()}

	// Wait until the events stream holds none of their events and the
	// archive holds them all.
	bs, ctx := b.stack.Env.Bus, t.Context()
	deadline := time.Now().Add(90 * time.Second)
	for {
		ei, err := bs.Events.Info(ctx)
		require.NoError(t, err)
		segs, err := archive.NewReader(store).Segments(ctx, bs.Config.EventsStream())
		require.NoError(t, err)
		if ei.State.LastSeq >= 2 && ei.State.Msgs == 0 && len(segs) > 0 && segs[len(segs)-1].ToSeq >= ei.State.LastSeq {
			break
		}
		require.True(t, time.Now().Before(deadline), "the events were not dropped, or not archived")
		time.Sleep(100 * time.Millisecond) // polling with a deadline, not synchronisation
	}
	want = append(want, refuse())

	rejected := func(args ...string) []string {
		t.Helper()
		out := b.run(t, append([]string{"audit", "--nats-url", b.stack.Env.URL, "--rejected"}, args...)...)
		require.Equal(t, toolctl.ExitOK, out.code, out.stderr)
		var ids []string
		sc := bufio.NewScanner(strings.NewReader(out.stdout))
		for sc.Scan() {
			var r struct {
				CallID    string `json:"call_id"`
				Outcome   string
				ErrorType string `json:"error_type"`
			}
			require.NoError(t, json.Unmarshal(sc.Bytes(), &r), sc.Text())
			require.Equal(t, "rejected", r.Outcome)
			require.Equal(t, "VALIDATION", r.ErrorType)
			ids = append(ids, r.CallID)
		}
		return ids
	}
	require.Equal(t, want[2:], rejected(), "the events stream holds only the last refusal")
	require.Equal(t, want, rejected("--archive", dir))
}
