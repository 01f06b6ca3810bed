package dispatch_test

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// gateTool returns a tool that reports each call id it starts on started
// and answers "stored" once release is called (or its context ends).
func gateTool(t *testing.T, name string) (tl *tool.Tool, started chan string, release func()) {
	started = make(chan string, 8)
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	tl = tool.Must(tool.New(name, func(ctx context.Context, _ struct{}) (string, error) {
		info, _ := tool.CallInfoFrom(ctx)
		started <- info.CallID
		select {
		case <-gate:
			return "stored", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}, tool.Idempotent()))
	return tl, started, release
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute): // far below the package's timeout
		t.Fatalf("no %s", what)
		panic("unreachable")
	}
}

// A worker's JetStream publish reaches core subscribers even when the
// results stream refuses it (or, on a cluster, never stores it): waiting
// callers — Call, GetResult with a wait and Watch — are answered only
// with the result the stream stored, which is what GetResult serves for
// ever after (issue 12, finding A).
func TestCallersAreAnsweredOnlyWithStoredResults(t *testing.T) {
	t.Parallel()
	gate, started, release := gateTool(t, "gate_stored")
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{gate}})
	id := identity.Default

	calls := make(chan *toolwirev1.CallResponse, 1)
	go func() {
		r, err := s.Dispatcher.Call(context.Background(), id, &toolwirev1.CallRequest{Tool: "gate_stored"}, 45*time.Second)
		if err != nil {
			r = &toolwirev1.CallResponse{State: toolwirev1.CallState_CALL_STATE_UNSPECIFIED}
		}
		calls <- r
	}()
	callID := receive(t, started, "execution")

	results := make(chan *toolwirev1.GetResultResponse, 1)
	go func() {
		r, err := s.Dispatcher.GetResult(context.Background(), id, callID, 45*time.Second)
		if err != nil {
			r = &toolwirev1.GetResultResponse{}
		}
		results <- r
	}()
	watched := make(chan *toolwirev1.ToolResponse, 1)
	go func() {
		var last *toolwirev1.ToolResponse
		_ = s.Dispatcher.Watch(context.Background(), id, callID, func(ev *toolwirev1.CallEvent) error {
			if ev.Type == toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED {
				last = ev.Response
			}
			return nil
		})
		watched <- last
	}()

	// A result the stream refuses (its expectation fails), published to
	// the call's result subject again and again while the waiters above
	// subscribe: each reaches every core subscriber.
	notStored := &toolwirev1.ToolResponse{EnvelopeVersion: 1, CallId: callID, Tool: "gate_stored", Ok: true,
		Content: []*toolwirev1.Content{{Kind: &toolwirev1.Content_Text{Text: &toolwirev1.TextContent{Text: "never stored"}}}}}
	data, err := proto.Marshal(notStored)
	require.NoError(t, err)
	subject := s.Env.Bus.Subjects.Result(id.Tenant, s.Dispatcher.Name(), callID)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for range 50 {
		_, err := s.Env.Bus.JS.Publish(t.Context(), subject, data, jetstream.WithExpectLastSequencePerSubject(1<<40))
		var apiErr *jetstream.APIError
		require.ErrorAs(t, err, &apiErr, "the stream refuses it")
		<-tick.C
	}
	release()

	stored, err := s.Dispatcher.GetResult(t.Context(), id, callID, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, stored.State)
	require.Equal(t, "stored", stored.Response.Content[0].GetText().Text)

	c := receive(t, calls, "Call answer")
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, c.State)
	require.True(t, proto.Equal(stored.Response, c.Response), "Call answered %v, the stream holds %v", c.Response, stored.Response)
	g := receive(t, results, "GetResult answer")
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, g.State)
	require.True(t, proto.Equal(stored.Response, g.Response), "GetResult answered %v", g.Response)
	w := receive(t, watched, "Watch end")
	require.True(t, proto.Equal(stored.Response, w), "Watch finished with %v", w)
}

// waitFor polls cond every 10ms until it holds, failing after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

// A result stored while the dispatcher's connection was down never reaches
// a core subscription; Call still answers it once the connection is back,
// long before its wait ends (issue 12, finding C).
func TestCallFindsResultStoredWhileReconnecting(t *testing.T) {
	t.Parallel()
	gate, started, release := gateTool(t, "gate_reconnect")
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{gate}})

	u, err := url.Parse(s.Env.URL)
	require.NoError(t, err)
	p := bustest.StartProxy(t, u.Host)
	u.Host = p.Addr()
	nc, err := bus.Dial(bus.ConnConfig{URL: u.String(), Name: "proxied-dispatcher"})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	b, err := bus.Open(t.Context(), nc, s.Env.Bus.Config, bus.Options{})
	require.NoError(t, err)
	d, err := dispatch.New(b, s.Registry, dispatch.Config{Name: "proxied", MaxQueueWait: time.Minute})
	require.NoError(t, err)
	require.NoError(t, d.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, d.Stop(ctx))
	})

	const wait = 45 * time.Second
	type answer struct {
		r   *toolwirev1.CallResponse
		err error
		in  time.Duration
	}
	answers := make(chan answer, 1)
	go func() {
		start := time.Now()
		r, err := d.Call(context.Background(), identity.Default, &toolwirev1.CallRequest{Tool: "gate_reconnect"}, wait)
		answers <- answer{r, err, time.Since(start)}
	}()
	callID := receive(t, started, "execution")

	p.SetCut(true)
	waitFor(t, "the dispatcher to lose its connection", func() bool { return nc.Status() != nats.CONNECTED })
	release()
	subject := s.Env.Bus.Subjects.Result(identity.Default.Tenant, "proxied", callID)
	waitFor(t, "the result to be stored", func() bool {
		_, err := s.Env.Bus.Results.GetLastMsgForSubject(t.Context(), subject)
		return err == nil
	})
	p.SetCut(false)

	a := receive(t, answers, "Call answer")
	require.NoError(t, a.err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, a.r.State, "answered after %s", a.in)
	require.Equal(t, "stored", a.r.Response.Content[0].GetText().Text)
	require.Less(t, a.in, wait, "answered before its wait ended")
}

// A duplicate Submit (same idempotency key and arguments) answers the
// earlier call's id, and its terminal response once it has finished, as
// SubmitResponse promises.
func TestDuplicateSubmitReturnsTheFinishedResponse(t *testing.T) {
	t.Parallel()
	gate, started, release := gateTool(t, "gate_dup")
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{gate}})
	req := func() *toolwirev1.SubmitRequest {
		return &toolwirev1.SubmitRequest{Tool: "gate_dup", IdempotencyKey: "dup-1"}
	}
	first, err := s.Client.Submit(t.Context(), connect.NewRequest(req()))
	require.NoError(t, err)
	require.False(t, first.Msg.Duplicate)
	require.Nil(t, first.Msg.Response)
	receive(t, started, "execution")

	running, err := s.Client.Submit(t.Context(), connect.NewRequest(req()))
	require.NoError(t, err)
	require.True(t, running.Msg.Duplicate)
	require.Equal(t, first.Msg.CallId, running.Msg.CallId)
	require.Nil(t, running.Msg.Response, "no response while the call runs")

	release()
	done, err := s.Client.GetResult(t.Context(), connect.NewRequest(&toolwirev1.GetResultRequest{CallId: first.Msg.CallId,
		Wait: durationpb.New(30 * time.Second)}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, done.Msg.State)

	dup, err := s.Client.Submit(t.Context(), connect.NewRequest(req()))
	require.NoError(t, err)
	require.True(t, dup.Msg.Duplicate)
	require.Equal(t, first.Msg.CallId, dup.Msg.CallId)
	require.NotNil(t, dup.Msg.Response, "the finished response")
	require.True(t, proto.Equal(done.Msg.Response, dup.Msg.Response), "got %v, want %v", dup.Msg.Response, done.Msg.Response)
	require.Equal(t, "stored", dup.Msg.Response.Content[0].GetText().Text)
}
