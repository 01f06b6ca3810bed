package dispatch_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/maintenance"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1/toolwirev1connect"
)

// eventsConsumers returns the consumers on the events stream, but for
// the overdue sweeper's, which follows the stream as long as the
// dispatcher runs.
func eventsConsumers(t *testing.T, s *dispatchtest.Stack) int {
	t.Helper()
	n := 0
	names := s.Env.Bus.Events.ConsumerNames(t.Context())
	for name := range names.Name() {
		if !strings.HasPrefix(name, maintenance.OverdueConsumerPrefix(s.Env.Bus.Subjects.Prefix)) {
			n++
		}
	}
	require.NoError(t, names.Err())
	return n
}

// requireNoConsumers polls until the events stream has no consumer left,
// failing after within.
func requireNoConsumers(t *testing.T, s *dispatchtest.Stack, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for n := eventsConsumers(t, s); n > 0; n = eventsConsumers(t, s) {
		if time.Now().After(deadline) {
			t.Fatalf("%d consumers remain on the events stream %s after the Watches ended", n, within)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

// watchAll watches callID through the API and returns the events and the
// error the stream ended with.
func watchAll(ctx context.Context, c toolwirev1connect.DispatcherServiceClient, callID string) ([]*toolwirev1.CallEvent, error) {
	stream, err := c.Watch(ctx, connect.NewRequest(&toolwirev1.WatchRequest{CallId: callID}))
	if err != nil {
		return nil, err
	}
	defer stream.Close()
	var events []*toolwirev1.CallEvent
	for stream.Receive() {
		events = append(events, stream.Msg().Event)
	}
	return events, stream.Err()
}

// 250 Watches on ids minted just now that nobody admitted end with
// not_found after the grace, and leave no consumer behind.
func TestWatchOnUnknownRecentIDsEnds(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Dispatcher: dispatch.Config{WatchGrace: 300 * time.Millisecond, MaxWatchesPerCaller: 500}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const n = 250
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			_, err := watchAll(ctx, s.Client, ulid.Make().String())
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "%v", err)
	}
	requireNoConsumers(t, s, time.Second)
}

// The race behind a CI hang: a fast call's result reached its caller
// before the Watch subscribed, and the stream had not stored it yet when
// the Watch first looked; a fast call records no other event. The Watch
// must look again and finish.
func TestWatchFindsAResultStoredAfterItsFirstLook(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	other := s.StartDispatcher(t, dispatch.Config{Name: "other"})
	dispatch.MissFirstResultLook(other)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"done"}`}, 20*time.Second)
	require.NoError(t, err)
	require.True(t, r.Response.GetOk())

	var got []toolwirev1.CallEventType
	var last *toolwirev1.CallEvent
	err = other.Watch(ctx, identity.Default, r.CallId, func(ev *toolwirev1.CallEvent) error {
		got, last = append(got, ev.Type), ev
		return nil
	})
	require.NoError(t, err, "the Watch ended with the result, not the test's deadline")
	require.Equal(t, toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED, last.GetType(), "%v", got)
	require.Equal(t, "done", last.Response.Content[0].GetText().Text)
	requireNoConsumers(t, s, time.Second)
}

// A caller's Watches are capped per replica; other callers are not held
// back, and a slot is released on every way a Watch ends.
func TestWatchesPerCallerAreCapped(t *testing.T) {
	t.Parallel()
	alice := identity.Identity{Tenant: "acme", Agent: "alice", Scopes: []string{"*"}}
	bob := identity.Identity{Tenant: "acme", Agent: "bob", Scopes: []string{"*"}}
	s := dispatchtest.Start(t, dispatchtest.Options{Auth: agentAuth{"alice": alice, "bob": bob},
		Dispatcher: dispatch.Config{MaxWatchesPerCaller: 1, WatchGrace: 100 * time.Millisecond}})
	ctx := t.Context()
	d := s.Dispatcher
	long, err := d.Submit(ctx, alice, &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"30s"}`})
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = d.Cancel(context.Background(), alice, long.CallID, "test over") })

	// alice's one Watch is open (its first event was sent).
	open := make(chan struct{})
	wctx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan error, 1)
	go func() {
		var once sync.Once
		watchDone <- d.Watch(wctx, alice, long.CallID, func(*toolwirev1.CallEvent) error {
			once.Do(func() { close(open) })
			return nil
		})
	}()
	select {
	case <-open:
	case <-time.After(time.Minute): // far below the package's timeout
		t.Fatal("the first Watch never opened")
	}
	_, err = watchAll(ctx, clientAs(s, "alice"), long.CallID)
	require.Equal(t, connect.CodeResourceExhausted, connect.CodeOf(err), "%v", err)
	require.ErrorIs(t, d.Watch(ctx, alice, long.CallID, nil), dispatch.ErrTooManyWatches)
	// bob is another caller.
	seen := errors.New("seen one")
	require.ErrorIs(t, d.Watch(ctx, bob, long.CallID, func(*toolwirev1.CallEvent) error { return seen }), seen)

	// Every way a Watch ends gives the slot back: the caller leaves ...
	stopWatch()
	require.ErrorIs(t, <-watchDone, context.Canceled)
	// ... the callback fails ...
	stop := errors.New("enough")
	require.ErrorIs(t, d.Watch(ctx, alice, long.CallID, func(*toolwirev1.CallEvent) error { return stop }), stop)
	// ... the id is unknown, at once or after the grace ...
	require.ErrorIs(t, d.Watch(ctx, alice, "01J00000000000000000000000", nil), dispatch.ErrUnknownCall)
	require.ErrorIs(t, d.Watch(ctx, alice, ulid.Make().String(), nil), dispatch.ErrUnknownCall)
	// ... the call finishes.
	done, err := d.Call(ctx, alice, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`}, 20*time.Second)
	require.NoError(t, err)
	events, err := watchAll(ctx, clientAs(s, "alice"), done.CallId)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED, events[len(events)-1].Type)
	// The slot is free again.
	_, err = watchAll(ctx, clientAs(s, "alice"), done.CallId)
	require.NoError(t, err)
	requireNoConsumers(t, s, time.Second)
}

// A caller's requests waiting in Call or GetResult are capped per replica;
// a refused Call is not admitted, and every way a wait ends releases it.
func TestWaitingPerCallerIsCapped(t *testing.T) {
	t.Parallel()
	alice := identity.Identity{Tenant: "acme", Agent: "alice", Scopes: []string{"*"}}
	bob := identity.Identity{Tenant: "acme", Agent: "bob", Scopes: []string{"*"}}
	hold, running, release := releasedHold(1)
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), hold),
		Auth: agentAuth{"alice": alice, "bob": bob}, Dispatcher: dispatch.Config{MaxWaitingPerCaller: 1}})
	ctx := t.Context()
	d := s.Dispatcher
	first := make(chan *toolwirev1.CallResponse, 1)
	go func() {
		r, _ := d.Call(ctx, alice, &toolwirev1.CallRequest{Tool: "hold"}, 20*time.Second)
		first <- r
	}()
	<-running // alice waits in Call

	_, err := clientAs(s, "alice").Call(ctx, connect.NewRequest(&toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`}))
	require.Equal(t, connect.CodeResourceExhausted, connect.CodeOf(err), "%v", err)
	_, err = d.GetResult(ctx, alice, ulid.Make().String(), time.Second)
	require.ErrorIs(t, err, dispatch.ErrTooManyWaiting)
	_, err = d.GetResult(ctx, alice, ulid.Make().String(), 0)
	require.NoError(t, err, "a look without a wait holds nothing")
	info, err := s.Env.Bus.Calls.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs, "the refused Call was not queued")
	r, err := d.Call(ctx, bob, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`}, 20*time.Second)
	require.NoError(t, err, "bob is another caller")
	require.True(t, r.Response.GetOk())
	close(release)
	require.True(t, (<-first).Response.GetOk())

	// Every way a wait ends gives the slot back: a result, a rejection,
	// the wait running out, the caller leaving.
	for name, run := range map[string]func() error{
		"result": func() error {
			_, err := d.Call(ctx, alice, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`}, 20*time.Second)
			return err
		},
		"rejected": func() error {
			_, err := d.Call(ctx, alice, &toolwirev1.CallRequest{Tool: "nope"}, 20*time.Second)
			return err
		},
		"pending": func() error {
			_, err := d.Call(ctx, alice, &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"300ms"}`}, time.Millisecond)
			return err
		},
		"left": func() error {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			_, err := d.Call(cctx, alice, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"x"}`}, 20*time.Second)
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
		"get result": func() error {
			_, err := d.GetResult(ctx, alice, ulid.Make().String(), time.Millisecond)
			return err
		},
	} {
		require.NoError(t, run(), name)
		_, err := d.GetResult(ctx, alice, ulid.Make().String(), time.Millisecond)
		require.NoError(t, err, "after %s the slot is free", name)
	}
}

// agentAuth maps `Authorization: Bearer <agent>` to an identity.
type agentAuth map[string]identity.Identity

func (a agentAuth) Authenticate(r *http.Request) (identity.Identity, error) {
	agent, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	id, ok := a[agent]
	if !ok {
		return identity.Identity{}, identity.ErrUnauthenticated
	}
	return id, nil
}

// clientAs is a client of s's API authenticated as agent.
func clientAs(s *dispatchtest.Stack, agent string) toolwirev1connect.DispatcherServiceClient {
	return toolwirev1connect.NewDispatcherServiceClient(http.DefaultClient, s.URL, connect.WithInterceptors(bearer(agent)))
}

// bearer sets `Authorization: Bearer <agent>` on every request.
type bearer string

func (b bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", "Bearer "+string(b))
		return next(ctx, req)
	}
}

func (b bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", "Bearer "+string(b))
		return conn
	}
}

func (bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
