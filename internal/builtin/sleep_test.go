package builtin_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// waitCtx reports on waiting when code selects on its Done channel, so a
// test can cancel only once the tool is really waiting.
type waitCtx struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func newWaitCtx(parent context.Context) *waitCtx {
	return &waitCtx{Context: parent, waiting: make(chan struct{})}
}

func (c *waitCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

type outcome struct {
	res *tool.Result
	err error
}

func TestSleep(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		args      string
		wantText  string
		wantSlept string
	}{
		{`{"duration":"1ms"}`, "slept 1ms", "1ms"},
		{`{"duration":"0s","text":"done"}`, "done", "0s"},
		{`{"duration":"0.5ms","text":""}`, "slept 500µs", "500µs"},
	} {
		res, err := invoke(t, context.Background(), "sleep", tt.args)
		require.NoError(t, err)
		require.Len(t, res.Content, 1)
		require.Equal(t, tt.wantText, res.Content[0].GetText().GetText())
		require.JSONEq(t, `{"slept":"`+tt.wantSlept+`"}`, string(res.Structured))
	}
}

func TestSleepHonoursCancellation(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		name    string
		stop    func(cancel context.CancelCauseFunc)
		wantErr error
	}{
		{"cancelled", func(cancel context.CancelCauseFunc) { cancel(nil) }, context.Canceled},
		{"cancelled with a cause", func(cancel context.CancelCauseFunc) { cancel(errors.New("worker shutdown")) }, context.Canceled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			parent, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			ctx := newWaitCtx(parent)

			sleep := byName(t, "sleep")
			done := make(chan outcome, 1)
			started := time.Now()
			go func() {
				res, err := sleep.Invoke(ctx, []byte(`{"duration":"1h"}`))
				done <- outcome{res, err}
			}()
			select {
			case <-ctx.waiting:
			case <-time.After(10 * time.Second):
				t.Fatal("sleep never waited on its context")
			}
			tt.stop(cancel)

			select {
			case out := <-done:
				require.Nil(t, out.res)
				require.ErrorIs(t, out.err, tt.wantErr)
				require.Less(t, time.Since(started), 10*time.Second)
				te := tool.AsError(ctx, out.err)
				require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, te.Type, "the worker maps it to CANCELLED")
			case <-time.After(10 * time.Second):
				t.Fatal("sleep did not return after cancellation")
			}
		})
	}
}

func TestSleepHonoursDeadline(t *testing.T) {
	t.Parallel()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	sleep := byName(t, "sleep")
	done := make(chan outcome, 1)
	go func() {
		res, err := sleep.Invoke(ctx, []byte(`{"duration":"1h"}`))
		done <- outcome{res, err}
	}()
	select {
	case out := <-done:
		require.ErrorIs(t, out.err, context.DeadlineExceeded)
	case <-time.After(10 * time.Second):
		t.Fatal("sleep did not return at its deadline")
	}
}

func TestSleepAlreadyCancelled(t *testing.T) {
	t.Parallel()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := invoke(t, ctx, "sleep", `{"duration":"0s"}`)
	require.ErrorIs(t, err, context.Canceled)
}

func TestSleepValidation(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		args    string
		wantMsg string
	}{
		{`{"duration":"soon"}`, "not a Go duration"},
		{`{"duration":""}`, "not a Go duration"},
		{`{}`, "not a Go duration"},
		{`{"duration":"-1s"}`, "must not be negative"},
		{`{"duration":"1h0m0.001s"}`, "at most 1h0m0s"},
		{`{"duration":10}`, "want string, got number"},
	} {
		t.Run(tt.args, func(t *testing.T) {
			t.Parallel()
			_, err := invoke(t, context.Background(), "sleep", tt.args)
			te := requireToolError(t, err)
			require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, te.Type)
			require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, te.SideEffects)
			require.Equal(t, "/duration", te.Violations[0].GetField())
			require.Contains(t, te.Message, tt.wantMsg)
		})
	}
	require.Equal(t, time.Hour, builtin.MaxSleep)
}
