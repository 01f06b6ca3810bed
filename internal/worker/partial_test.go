package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/redact"
	"github.com/toolwire/toolwire/internal/worker"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A tool whose partial output is refused (here every chunk is over
// MaxPartialChunkBytes) is still alive when it calls Partial: it does not
// die of its heartbeat timeout.
func TestRefusedPartialOutputKeepsTheToolAlive(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", tool.MaxPartialChunkBytes)
	refused := tool.Must(tool.New("refused", func(ctx context.Context, _ empty) (string, error) {
		for range 15 {
			if err := tool.PartialText(ctx, big); err == nil {
				return "", errors.New("a chunk over the bound was sent")
			}
			select {
			case <-time.After(40 * time.Millisecond): // the work itself
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return "finished", nil
	}, tool.WithTimeouts(0, 0, 0, 300*time.Millisecond), fastRetry(1)))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{refused}})
	r := callTool(t, s, "refused")
	require.True(t, r.Ok, "%v", r.Error)
}

// watchPartial returns the text of the partial output chunks of a call,
// as Watch streams them, in order.
func watchPartial(t *testing.T, s *dispatchtest.Stack, callID string) []string {
	t.Helper()
	var text []string
	err := s.Dispatcher.Watch(t.Context(), identity.Default, callID, func(ev *toolwirev1.CallEvent) error {
		for _, c := range ev.GetPartial() {
			text = append(text, c.GetText().GetText())
		}
		return nil
	})
	require.NoError(t, err)
	return text
}

// Once the attempt has returned, Partial (from a goroutine of the tool
// that runs on) is refused and publishes nothing: no chunk is stored after
// the result.
func TestPartialAfterTheAttemptEndsIsRefused(t *testing.T) {
	t.Parallel()
	ctxs := make(chan context.Context, 1)
	early := tool.Must(tool.New("early", func(ctx context.Context, _ empty) (string, error) {
		if err := tool.PartialText(ctx, "during"); err != nil {
			return "", err
		}
		ctxs <- ctx
		return "done", nil
	}, tool.ReadOnly()))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{early}})
	r, err := s.Dispatcher.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "early"}, 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.Ok, "%v", r.Response.Error)
	require.ErrorIs(t, tool.PartialText(<-ctxs, "late"), tool.ErrPartialClosed)
	require.Equal(t, []string{"during"}, watchPartial(t, s, r.CallId))
}

// An execution the watchdog abandoned publishes no partial output after.
func TestPartialOfAnAbandonedAttemptIsRefused(t *testing.T) {
	t.Parallel()
	ctxs := make(chan context.Context, 4)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	stuck := tool.Must(tool.New("stuck_partial", func(ctx context.Context, _ empty) (string, error) {
		ctxs <- ctx
		<-release // ignores its context
		return "late", nil
	}, tool.WithTimeouts(0, 50*time.Millisecond, 0, 0)))
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	w := startCustomWorker(t, s, worker.Config{Watchdog: 100 * time.Millisecond}, bus.PoolConfig{AckWait: time.Second}, stuck)
	r, err := s.Dispatcher.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "stuck_partial"}, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_UNKNOWN_OUTCOME, r.Response.GetError().GetType())
	require.EqualValues(t, 1, w.Stats().Abandoned)
	require.ErrorIs(t, tool.PartialText(<-ctxs, "after abandon"), tool.ErrPartialClosed)
}

// A secret split across two chunks is never stored in pieces: the worker
// holds back the end of each chunk's text and redacts over the join.
func TestSecretSplitAcrossPartialChunksIsRedacted(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-t0ken-value"
	split := tool.Must(tool.New("split", func(ctx context.Context, in struct {
		Token string `json:"token" toolwire:"secret"`
	}) (string, error) {
		if err := tool.PartialText(ctx, "token is "+in.Token[:7]); err != nil {
			return "", err
		}
		if err := tool.PartialText(ctx, in.Token[7:]+"; next"); err != nil {
			return "", err
		}
		if err := tool.PartialText(ctx, " é and the end"); err != nil {
			return "", err
		}
		return "done", nil
	}, tool.ReadOnly()))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{split}})
	r, err := s.Dispatcher.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: "split",
		ArgumentsJson: `{"token":"` + secret + `"}`}, 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.Ok, "%v", r.Response.Error)
	chunks := watchPartial(t, s, r.CallId)
	joined := strings.Join(chunks, "")
	require.Equal(t, "token is "+redact.Redacted+"; next é and the end", joined, "all the text, in order, held back text last")
	for _, c := range chunks {
		require.NotContains(t, c, secret[:7])
		require.NotContains(t, c, secret[7:])
	}
}
