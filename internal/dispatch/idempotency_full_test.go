package dispatch_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A full idempotency store refuses keyed calls with OVERLOADED and a
// retry_after, never INTERNAL, and a refusal writes nothing there; a
// repeat of a bound key still answers its call; calls without a key go
// on; once keys go away, keyed calls are taken again. Two ways to get
// there: the view reads the store as nearly full (the check before the
// claim), or the store fills between two reads (the claim itself fails).
func TestFullIdempotencyStore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		refresh time.Duration
		msg     string
	}{
		// The store's use is read every 2s: the view refuses first.
		{"nearly full", 20 * time.Millisecond, "the idempotency store (stream KV_toolwire_idempotency) is "},
		// The view reads the store once, at start, empty: only the
		// server refuses, between two reads.
		{"filled between reads", time.Hour, "the idempotency store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := dispatchtest.Start(t, dispatchtest.Options{Bus: bus.Config{IdempotencyMaxBytes: 16 << 10},
				Dispatcher: dispatch.Config{LoadRefresh: tc.refresh}})
			ctx := t.Context()
			first := keyed("k-0")
			firstSub, err := s.Dispatcher.Submit(ctx, identity.Default, first)
			require.NoError(t, err)
			require.Nil(t, firstSub.Rejected)

			refused := fillKeys(t, s, tc.msg)
			requireOverloaded(t, refused, tc.msg)
			require.Positive(t, refused.Error.RetryAfter.AsDuration())

			before := keysStored(ctx, t, s)
			calls := callsStored(t, s)
			for i := range 20 {
				sub, err := s.Dispatcher.Submit(ctx, identity.Default, keyed(fmt.Sprintf("refused-%d", i)))
				require.NoError(t, err, "a full store is never an error (INTERNAL)")
				requireOverloaded(t, sub.Rejected, "the idempotency store")
			}
			require.Equal(t, before, keysStored(ctx, t, s), "a refusal writes nothing to the idempotency store")
			require.Equal(t, calls, callsStored(t, s), "a refused call is never queued")

			dup, err := s.Dispatcher.Submit(ctx, identity.Default, first)
			require.NoError(t, err)
			require.True(t, dup.Duplicate, "a repeat of a bound key answers its call")
			require.Equal(t, firstSub.CallID, dup.CallID)
			other := keyed("k-0")
			other.ArgumentsJson = `{"text":"other"}`
			conflict, err := s.Dispatcher.Submit(ctx, identity.Default, other)
			require.NoError(t, err)
			require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CONFLICT, conflict.Rejected.GetError().GetType())
			require.Equal(t, before, keysStored(ctx, t, s))

			plain, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"plain"}`})
			require.NoError(t, err)
			require.Nil(t, plain.Rejected, "a call without a key does not write the idempotency store")

			// Keys go away (their TTL, here a purge): keyed calls are taken
			// again once the store's use is read.
			st, err := s.Env.Bus.JS.Stream(ctx, "KV_"+s.Env.Bus.Config.IdempotencyBucket())
			require.NoError(t, err)
			require.NoError(t, st.Purge(ctx))
			requireEventually(t, func() bool {
				sub, err := s.Dispatcher.Submit(ctx, identity.Default, keyed("after"))
				require.NoError(t, err)
				return sub.Rejected == nil
			}, "a keyed call is taken once the store has room")
		})
	}
}

// keyed is an echo call with idempotency key k.
func keyed(k string) *toolwirev1.CallRequest {
	return &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"keyed"}`, IdempotencyKey: k}
}

// fillKeys submits keyed calls until one is refused with msg; it fails
// on an error or another refusal.
func fillKeys(t *testing.T, s *dispatchtest.Stack, msg string) *toolwirev1.ToolResponse {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for i := 1; ; i++ {
		require.True(t, time.Now().Before(deadline), "the idempotency store never refused a key")
		sub, err := s.Dispatcher.Submit(t.Context(), identity.Default, keyed(fmt.Sprintf("k-%d", i)))
		require.NoError(t, err, "call %d: a full store is never an error (INTERNAL)", i)
		if sub.Rejected == nil {
			continue
		}
		requireOverloaded(t, sub.Rejected, "the idempotency store")
		if strings.Contains(sub.Rejected.Error.Message, msg) {
			return sub.Rejected
		}
	}
}

// keyStore is the idempotency bucket's stored messages and bytes.
type keyStore struct{ msgs, bytes uint64 }

func keysStored(ctx context.Context, t *testing.T, s *dispatchtest.Stack) keyStore {
	t.Helper()
	st, err := s.Env.Bus.JS.Stream(ctx, "KV_"+s.Env.Bus.Config.IdempotencyBucket())
	require.NoError(t, err)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	return keyStore{info.State.Msgs, info.State.Bytes}
}
