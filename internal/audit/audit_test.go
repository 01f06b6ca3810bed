package audit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/maintenance"
	"github.com/toolwire/toolwire/internal/signing"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

type empty struct{}

type secretIn struct {
	User     string `json:"user"`
	Password string `json:"password" jsonschema:"the password" toolwire:"secret"`
}

// tools: echo and fail (built-in), sleep for cancellations, a tool that
// always fails transiently (dead-lettered after two attempts) and one with
// a secret argument.
func tools(t *testing.T) []*tool.Tool {
	down := tool.Must(tool.New("down", func(context.Context, empty) (string, error) {
		return "", tool.Transient(errors.New("still down"))
	}, tool.Idempotent(), tool.WithRetryPolicy(&toolwirev1.RetryPolicy{MaxAttempts: 2,
		InitialInterval: durationpb.New(time.Millisecond), MaxInterval: durationpb.New(time.Millisecond)})))
	login := tool.Must(tool.New("login", func(_ context.Context, in secretIn) (string, error) { return "hi " + in.User, nil }))
	if !strings.Contains(login.Spec().InputSchemaJson, `"x-toolwire-secret":true`) {
		t.Fatalf("the secret is not marked: %s", login.Spec().InputSchemaJson)
	}
	return append(builtin.Tools(), down, login)
}

type plan struct {
	tool, args string
	s2s        time.Duration
	cancel     bool
	want       string
}

// TestVerifyAccountsForEveryCall: 10,000 calls with mixed outcomes are
// all accounted for with zero anomalies; deleting one result from RESULTS
// gets exactly that call reported.
func TestVerifyAccountsForEveryCall(t *testing.T) {
	t.Parallel()
	const n = 10000
	// No bound on queue wait: this test counts calls, and on a loaded
	// machine the pool's drain slows enough that admission refused calls
	// without a schedule-to-start (found in a CI run beside other builds).
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: tools(t), Concurrency: 256,
		Dispatcher: dispatch.Config{MaxQueueWait: -1}})
	id := identity.Default
	ctx := t.Context()
	plans := []plan{
		{tool: "echo", args: `{"text":"hi"}`, want: audit.OutcomeOK},
		{tool: "fail", args: `{"type":"PERMANENT"}`, want: audit.OutcomeError},
		{tool: "echo", args: `{"text":"late"}`, s2s: time.Nanosecond, want: audit.OutcomeExpired},
		{tool: "down", args: `{}`, want: audit.OutcomeDeadLettered},
		{tool: "login", args: `{"user":"ann","password":"hunter2"}`, want: audit.OutcomeOK},
	}
	want := map[string]int{}
	ids := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				p := plans[i%len(plans)]
				if i%100 == 99 { // 1% cancelled while running
					p = plan{tool: "sleep", args: `{"duration":"1m"}`, cancel: true, want: audit.OutcomeCancelled}
				}
				req := &toolwirev1.CallRequest{Tool: p.tool, ArgumentsJson: p.args, Session: fmt.Sprint("s", i%7)}
				if p.s2s > 0 {
					req.ScheduleToStart = durationpb.New(p.s2s)
				}
				sub, err := s.Dispatcher.Submit(ctx, id, req)
				// A call its pool cannot start within its schedule-to-start
				// is refused at admission (OVERLOADED) while the pool has a
				// queue: submit it again until the pool has none, so that it
				// is admitted and expires at the worker.
				for tries := 0; p.s2s > 0 && err == nil && tries < 5000 &&
					sub.Rejected.GetError().GetType() == toolwirev1.ErrorType_ERROR_TYPE_OVERLOADED; tries++ {
					time.Sleep(time.Millisecond) // retry pacing, not synchronisation
					sub, err = s.Dispatcher.Submit(ctx, id, req)
				}
				if err != nil || sub.Rejected != nil {
					errs <- fmt.Errorf("submit %d: %v %v", i, err, sub)
					return
				}
				ids[i] = sub.CallID
				if p.cancel {
					if _, err := s.Dispatcher.Cancel(ctx, id, sub.CallID, "audit test"); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Wait for every result, and tally the outcomes we expect.
	for i, callID := range ids {
		r, err := s.Dispatcher.GetResult(ctx, id, callID, time.Minute)
		if err != nil || r.State != toolwirev1.CallState_CALL_STATE_DONE {
			t.Fatalf("call %d %s: %v %v", i, callID, r.GetState(), err)
		}
		want[outcomeOf(r.Response)]++
	}
	for _, o := range []string{audit.OutcomeOK, audit.OutcomeError, audit.OutcomeExpired, audit.OutcomeDeadLettered, audit.OutcomeCancelled} {
		if want[o] == 0 {
			t.Fatalf("the workload produced no %s call: %v", o, want)
		}
	}

	src, err := audit.Open(ctx, s.Env.Bus.NC, "toolwire")
	if err != nil {
		t.Fatal(err)
	}
	var records int
	var sawSecret, sawRedacted bool
	sum, err := src.Run(ctx, audit.Filter{}, audit.Options{}, func(r *audit.Record) error {
		records++
		if strings.Contains(string(r.Arguments), "hunter2") {
			sawSecret = true
		}
		if r.Tool == "login" && strings.Contains(string(r.Arguments), audit.Redacted) && strings.Contains(string(r.Arguments), "ann") {
			sawRedacted = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sum.OK() || records != n || sum.Records != n {
		t.Fatalf("audit: %d records, summary %+v", records, sum)
	}
	for o, c := range want {
		if sum.Outcomes[o] != c {
			t.Errorf("outcome %s: audit counted %d, calls answered %d", o, sum.Outcomes[o], c)
		}
	}
	if sawSecret || !sawRedacted {
		t.Fatalf("secret shown %v, redacted form seen %v", sawSecret, sawRedacted)
	}

	// Remove the result of one call: exactly that call is reported.
	victim := ids[n/2]
	r, err := s.Env.Bus.Results.GetLastMsgForSubject(ctx, "toolwire.result.default.*."+victim)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Env.Bus.Results.DeleteMsg(ctx, r.Sequence); err != nil {
		t.Fatal(err)
	}
	later := func() time.Time { return time.Now().Add(time.Hour) }
	sum, err = src.Run(ctx, audit.Filter{}, audit.Options{Now: later}, func(*audit.Record) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Anomalies) != 1 || sum.Anomalies[0].CallID != victim || sum.Anomalies[0].Kind != "missing_result" {
		t.Fatalf("want exactly %s reported, got %+v", victim, sum.Anomalies)
	}
}

func outcomeOf(r *toolwirev1.ToolResponse) string {
	switch {
	case r.GetOk():
		return audit.OutcomeOK
	case r.GetMeta().GetSource() == "dlq" || r.GetError().GetType() == toolwirev1.ErrorType_ERROR_TYPE_MAX_ATTEMPTS:
		return audit.OutcomeDeadLettered
	case r.GetError().GetType() == toolwirev1.ErrorType_ERROR_TYPE_CANCELLED:
		return audit.OutcomeCancelled
	case r.GetError().GetType() == toolwirev1.ErrorType_ERROR_TYPE_EXPIRED:
		return audit.OutcomeExpired
	}
	return audit.OutcomeError
}

// TestReplaysAndEvents: shadow messages between calls are no gaps; events
// are read without leaving consumers behind.
func TestReplaysAndEvents(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{})
	ctx := t.Context()
	call := func(tool, args string) string {
		r, err := s.Dispatcher.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: tool, ArgumentsJson: args}, 30*time.Second)
		if err != nil || !r.Response.GetOk() {
			t.Fatalf("%s: %v %v", tool, r, err)
		}
		return r.CallId
	}
	call("echo", `{"text":"a"}`)
	if _, err := s.Env.Bus.JS.Publish(ctx, "toolwire.shadow.native.default.builtin.echo", []byte("a replay")); err != nil {
		t.Fatal(err)
	}
	// Submitted, so that its ACCEPTED record is sent at once (a call
	// waited on in Call gets one only when it outlives a timer, which a
	// loaded machine can fire after the result): events are ACCEPTED and
	// STARTED at least.
	sub, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"300ms"}`})
	if err != nil || sub.Rejected != nil {
		t.Fatalf("sleep: %v %v", sub, err)
	}
	slow := sub.CallID
	if g, err := s.Dispatcher.GetResult(ctx, identity.Default, slow, 30*time.Second); err != nil || !g.GetResponse().GetOk() {
		t.Fatalf("sleep's result: %v %v", g, err)
	}
	src, err := audit.Open(ctx, s.Env.Bus.NC, "toolwire")
	if err != nil {
		t.Fatal(err)
	}
	var events int
	sum, err := src.Run(ctx, audit.Filter{}, audit.Options{Events: true}, func(r *audit.Record) error {
		if r.CallID == slow {
			events = len(r.Events)
		}
		return nil
	})
	if err != nil || !sum.OK() || sum.Records != 2 {
		t.Fatalf("audit: %+v %v", sum, err)
	}
	if events < 2 {
		t.Fatalf("the slow call's events: %d", events)
	}
	// The dispatcher's overdue sweeper follows EVENTS while it runs.
	names := s.Env.Bus.Events.ConsumerNames(ctx)
	for name := range names.Name() {
		if !strings.HasPrefix(name, maintenance.OverdueConsumerPrefix(s.Env.Bus.Subjects.Prefix)) {
			t.Fatalf("consumer left on EVENTS: %s", name)
		}
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
}

// A tenant filter that is no valid tenant name is refused, never mapped to
// a subject token (a.b would read tenant a_b's calls).
func TestTenantFilterIsNeverMapped(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	src, err := audit.Open(t.Context(), env.Bus.NC, "toolwire")
	require.NoError(t, err)
	for _, tenant := range []string{"a.b", "a b", "a*", "zoë"} {
		_, err := src.Run(t.Context(), audit.Filter{Tenant: tenant}, audit.Options{}, func(*audit.Record) error { return nil })
		require.ErrorContains(t, err, "tenant filter", tenant)
	}
	_, err = src.Run(t.Context(), audit.Filter{Tenant: "a_b"}, audit.Options{}, func(*audit.Record) error { return nil })
	require.NoError(t, err)
}

// An audit leaves no consumer on CALLS, whether it reads to the end (over
// several fetches, each of which replaces the ordered consumer's server
// consumer) or its reader stops early: a consumer left behind would
// outlive the command by minutes.
func TestAuditLeavesNoConsumer(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	ctx := t.Context()
	const n = 600 // several fetch batches
	for i := range n {
		_, err := env.Bus.JS.Publish(ctx, env.Bus.Subjects.Call(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, "acme", "builtin", "echo"),
			fmt.Appendf(nil, "not a call %d", i))
		require.NoError(t, err)
	}
	src, err := audit.Open(ctx, env.Bus.NC, "toolwire")
	require.NoError(t, err)
	consumers := func() int {
		info, err := env.Bus.Calls.Info(ctx)
		require.NoError(t, err)
		return info.State.Consumers
	}

	sum, err := src.Run(ctx, audit.Filter{}, audit.Options{}, func(*audit.Record) error { return nil })
	require.NoError(t, err)
	require.EqualValues(t, n, sum.Scanned)
	require.Zero(t, consumers(), "a finished audit leaves no consumer")

	stop := errors.New("reader stopped")
	_, err = src.Run(ctx, audit.Filter{}, audit.Options{}, func(*audit.Record) error { return stop })
	require.ErrorIs(t, err, stop)
	require.Zero(t, consumers(), "an audit stopped early leaves no consumer")
}

// A worker credential that stores a flood of forged events on a call's
// subject pushes none of the call's own events out of its record: events
// not believed count against the read's bound (10,000), never against
// the record's 1,000; the first 100 are named one by one and the rest in
// one line. Past the read's bound the record names the first event it did
// not read, and believed events past the 1,000 shown are counted, so no
// event is hidden silently.
func TestForgedEventsPushNoEventOutOfTheRecord(t *testing.T) {
	t.Parallel()
	started := make(chan string, 2)
	release := map[string]chan struct{}{}
	var mu sync.Mutex
	gate := tool.Must(tool.New("gate", func(ctx context.Context, in struct {
		Name string `json:"name"`
	}) (string, error) {
		mu.Lock()
		ch := release[in.Name]
		mu.Unlock()
		started <- in.Name
		select {
		case <-ch:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		if err := tool.PartialText(ctx, "after the flood of "+in.Name); err != nil {
			return "", err
		}
		return "done", nil
	}, tool.ReadOnly()))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{gate}})
	ctx := t.Context()
	src, err := audit.Open(ctx, s.Env.Bus.NC, "toolwire")
	require.NoError(t, err)
	// A key of the gate tool's pool: what it signs is believed.
	poolKey, err := signing.NewKey()
	require.NoError(t, err)
	_, err = s.Env.Bus.Registry.Create(ctx, signing.PoolKey(poolKey.Public(), "native"), []byte(`{}`))
	require.NoError(t, err)
	run := func(name string, forged int, signed bool) (*audit.Record, *audit.Summary) {
		mu.Lock()
		release[name] = make(chan struct{})
		mu.Unlock()
		sub, err := s.Dispatcher.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "gate", ArgumentsJson: `{"name":"` + name + `"}`})
		require.NoError(t, err)
		require.Nil(t, sub.Rejected)
		require.Equal(t, name, <-started)
		// The flood, stored while the call runs: after its STARTED claim,
		// before its partial output.
		subject := s.Env.Bus.Subjects.Event(identity.Default.Tenant, "forger", sub.CallID)
		data, err := proto.Marshal(&toolwirev1.CallEvent{CallId: sub.CallID, Tool: "gate", Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS})
		require.NoError(t, err)
		for range forged {
			msg := &nats.Msg{Subject: subject, Data: data}
			if signed {
				msg = poolKey.SignedMsg(subject, signing.KindEvent, sub.CallID, 0, data, nil)
			}
			_, err := s.Env.Bus.JS.PublishMsgAsync(msg)
			require.NoError(t, err)
		}
		select {
		case <-s.Env.Bus.JS.PublishAsyncComplete():
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		mu.Lock()
		close(release[name])
		mu.Unlock()
		g, err := s.Dispatcher.GetResult(ctx, identity.Default, sub.CallID, 30*time.Second)
		require.NoError(t, err)
		require.True(t, g.GetResponse().GetOk(), "%v", g)
		var rec *audit.Record
		sum, err := src.Run(ctx, audit.Filter{CallID: sub.CallID}, audit.Options{Events: true, Verify: true}, func(r *audit.Record) error {
			rec = r
			return nil
		})
		require.NoError(t, err)
		require.NotNil(t, rec)
		return rec, sum
	}
	shows := func(rec *audit.Record, text string) bool {
		for _, e := range rec.Events {
			if strings.Contains(string(e), text) {
				return true
			}
		}
		return false
	}
	problems := func(rec *audit.Record) map[string]int {
		out := map[string]int{}
		for _, r := range rec.Refused {
			out[r.Problem]++
		}
		return out
	}

	rec, sum := run("a", 1100, false)
	require.True(t, shows(rec, "after the flood of a"), "the call's partial output after 1,100 forged events: %d events shown", len(rec.Events))
	require.Equal(t, map[string]int{"event unsigned": 100, "events not believed": 1}, problems(rec))
	require.Contains(t, rec.Refused[100].Detail, "1000 more events not believed")
	require.Len(t, sum.Anomalies, 101)
	require.False(t, sum.OK())

	rec, sum = run("b", 10000, false)
	require.False(t, shows(rec, "after the flood of b"), "an event past the read's bound was read")
	require.NotEmpty(t, rec.Events, "the call's events before the flood")
	p := problems(rec)
	require.Equal(t, 1, p["events not read"], "%v", p)
	require.Equal(t, 1, p["events not believed"], "%v", p)
	require.Equal(t, 100, p["event unsigned"], "%v", p)
	require.False(t, sum.OK())

	// Believed events past the 1,000 a record shows are counted, never
	// cut silently (and are no anomaly).
	rec, sum = run("c", 1005, true)
	require.Len(t, rec.Events, 1000)
	require.GreaterOrEqual(t, rec.EventsNotShown, 6, "the pool's 1,005 events and the call's own after them")
	require.False(t, shows(rec, "after the flood of c"))
	require.True(t, sum.OK(), "%v", sum.Anomalies)
}
