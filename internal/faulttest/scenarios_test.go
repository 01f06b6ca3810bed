package faulttest_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/faulttest"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// figure logs a number for docs/reliability.md.
func figure(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("FIGURE %s: "+format, append([]any{t.Name()}, args...)...)
}

func ledgerCall(tool string, sleepMS int, text string) *toolwirev1.CallRequest {
	return &toolwirev1.CallRequest{Tool: tool, ArgumentsJson: fmt.Sprintf(`{"sleep_ms":%d,"text":%q}`, sleepMS, text)}
}

// submitAll submits calls concurrently and returns the accepted ids in
// order (empty strings for refused ones).
func submitAll(t *testing.T, c *faulttest.Cluster, calls []*toolwirev1.CallRequest) []string {
	t.Helper()
	ids := make([]string, len(calls))
	var wg sync.WaitGroup
	for i, o := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := c.Submit(t.Context(), o)
			if err == nil {
				ids[i] = id
			}
		}()
	}
	wg.Wait()
	return ids
}

func nonEmpty(ids []string) []string {
	var out []string
	for _, id := range ids {
		if id != "" {
			out = append(out, id)
		}
	}
	return out
}

// waitLedger polls the ledger until cond holds.
func waitLedger(t *testing.T, c *faulttest.Cluster, what string, cond func([]faulttest.Entry) bool) []faulttest.Entry {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		es := faulttest.ReadLedger(t, c.Ledger)
		if cond(es) {
			return es
		}
		require.True(t, time.Now().Before(deadline), "timed out waiting for: %s", what)
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

// kill -9 a worker mid-execution under load: nothing is lost, each
// interrupted call completes on another worker.
func TestKillWorkerUnderLoad(t *testing.T) {
	t.Parallel()
	c := faulttest.NewCluster(t)
	victim := c.StartWorker(faulttest.WorkerOptions{Name: "victim", Concurrency: 8, AckWait: 2 * time.Second})
	c.StartWorker(faulttest.WorkerOptions{Name: "survivor", Concurrency: 8, AckWait: 2 * time.Second})
	var calls []*toolwirev1.CallRequest
	for i := range 120 {
		calls = append(calls, ledgerCall("ledger_idem", 150, fmt.Sprintf("c%d", i)))
	}
	ids := submitAll(t, c, calls)
	victimPID := victim.Cmd.Process.Pid
	waitLedger(t, c, "victim running calls", func(es []faulttest.Entry) bool {
		n := 0
		for _, e := range es {
			if e.PID == victimPID && e.Phase == "start" {
				n++
			}
		}
		return n >= 12
	})
	victim.Kill()
	killed := time.Now()

	rep := c.Check(t.Context(), len(calls), nonEmpty(ids), 60*time.Second)
	t.Log(rep)
	require.Equal(t, len(calls), rep.Accepted)
	require.Zero(t, rep.Lost)
	require.Zero(t, rep.Duplicates)
	require.Equal(t, len(calls), rep.Outcomes["OK"])

	// Calls the victim started but never finished completed on the survivor.
	es := faulttest.ReadLedger(t, c.Ledger)
	doneBy := map[string]int{}
	for _, e := range es {
		if e.Phase == "done" {
			doneBy[e.CallID] = e.PID
		}
	}
	var interrupted []string
	for _, e := range es {
		if e.PID == victimPID && e.Phase == "start" && doneBy[e.CallID] != victimPID {
			interrupted = append(interrupted, e.CallID)
		}
	}
	require.NotEmpty(t, interrupted)
	var worst time.Duration
	for _, id := range interrupted {
		resp, err := c.Result(t.Context(), id, 0)
		require.NoError(t, err)
		require.True(t, resp.Ok)
		require.Equal(t, "survivor", resp.Meta.Worker)
		worst = max(worst, resp.Meta.FinishedAt.AsTime().Sub(killed))
	}
	figure(t, "interrupted=%d kill_to_completion_max=%s (AckWait 2s)", len(interrupted), worst.Round(time.Millisecond))
}

// Kill at each boundary with failpoints compiled into the test build.
func TestKillAtBoundaries(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		failpoint  string
		tool       string
		killMidRun bool
		want       toolwirev1.ErrorType // UNSPECIFIED = ok
		executions int
	}{
		{"after fetch", "after-fetch=exit-once", "ledger", false, 0, 1},
		{"mid tool, not idempotent", "", "ledger", true, toolwirev1.ErrorType_ERROR_TYPE_UNKNOWN_OUTCOME, 1},
		{"mid tool, idempotent", "", "ledger_idem", true, 0, 2},
		{"after side effect before result", "before-result-publish=exit-once", "ledger", false, toolwirev1.ErrorType_ERROR_TYPE_UNKNOWN_OUTCOME, 1},
		{"after result before ack", "after-result-publish=exit-once", "ledger", false, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := faulttest.NewCluster(t)
			w := c.StartWorker(faulttest.WorkerOptions{Name: "first", AckWait: time.Second, Failpoints: tc.failpoint})
			sleep := 0
			if tc.killMidRun {
				sleep = 3000
			}
			id, err := c.Submit(t.Context(), ledgerCall(tc.tool, sleep, "x"))
			require.NoError(t, err)
			require.NotEmpty(t, id)
			if tc.killMidRun {
				waitLedger(t, c, "call started", func(es []faulttest.Entry) bool { return len(es) > 0 })
				w.Kill()
			} else {
				require.Equal(t, 137, w.Wait(t, 30*time.Second), "the failpoint kills the worker")
			}
			c.StartWorker(faulttest.WorkerOptions{Name: "second", AckWait: time.Second})
			resp, err := c.Result(t.Context(), id, 60*time.Second)
			require.NoError(t, err)
			if tc.want == 0 {
				require.True(t, resp.Ok, "%v", resp.Error)
			} else {
				require.Equal(t, tc.want, resp.Error.GetType(), resp.GetError().GetMessage())
			}
			require.Equal(t, tc.executions, faulttest.Executions(faulttest.ReadLedger(t, c.Ledger))[id])
			require.EqualValues(t, 1, c.Check(t.Context(), 1, []string{id}, time.Second).Terminal)
		})
	}
}

// Restart the nats-server process under load: no accepted call is lost.
func TestRestartNATSUnderLoad(t *testing.T) {
	t.Parallel()
	c := faulttest.NewCluster(t)
	restartUnderLoad(t, c, func(ctx context.Context, o *toolwirev1.CallRequest) (string, error) { return c.Submit(ctx, o) })
}

// The same with callers waiting in Call, as agents do: every call
// answers; none accepted is lost or run twice.
func TestRestartNATSUnderLoadWithCall(t *testing.T) {
	t.Parallel()
	c := faulttest.NewCluster(t)
	restartUnderLoad(t, c, func(ctx context.Context, o *toolwirev1.CallRequest) (string, error) {
		return c.Call(ctx, o, 4*time.Second)
	})
}

// restartUnderLoad restarts the NATS server while eight callers admit
// calls through admit, and checks every accepted call ran exactly once.
func restartUnderLoad(t *testing.T, c *faulttest.Cluster, admit func(context.Context, *toolwirev1.CallRequest) (string, error)) {
	c.StartWorker(faulttest.WorkerOptions{Name: "a", Concurrency: 16, AckWait: 2 * time.Second})
	c.StartWorker(faulttest.WorkerOptions{Name: "b", Concurrency: 16, AckWait: 2 * time.Second})
	ctx := t.Context()
	var mu sync.Mutex
	var accepted []string
	var acceptedAt []time.Time
	submitted := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				id, err := admit(sctx, ledgerCall("ledger_idem", 20, fmt.Sprintf("g%d-%d", g, i)))
				cancel()
				mu.Lock()
				submitted++
				if err == nil && id != "" {
					accepted = append(accepted, id)
					acceptedAt = append(acceptedAt, time.Now())
				}
				mu.Unlock()
			}
		}()
	}
	waitFor := func(n int) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			k := len(accepted)
			mu.Unlock()
			if k >= n {
				return
			}
			require.True(t, time.Now().Before(deadline), "load stalled at %d accepted calls", k)
			time.Sleep(10 * time.Millisecond) // polling with a deadline
		}
	}
	waitFor(200)
	gap := c.RestartNATS()
	mu.Lock()
	before := len(accepted)
	mu.Unlock()
	waitFor(before + 200)
	close(stop)
	wg.Wait()

	rep := c.Check(ctx, submitted, accepted, 30*time.Second)
	t.Log(rep)
	for _, id := range rep.LostIDs {
		t.Logf("lost %s: %s", id, c.Diagnose(ctx, id))
	}
	require.Zero(t, rep.Lost, "accepted calls lost")
	require.Zero(t, rep.Duplicates)
	require.Equal(t, rep.Accepted, rep.Outcomes["OK"])
	sort.Slice(acceptedAt, func(i, j int) bool { return acceptedAt[i].Before(acceptedAt[j]) })
	var admissionGap time.Duration
	for i := 1; i < len(acceptedAt); i++ {
		admissionGap = max(admissionGap, acceptedAt[i].Sub(acceptedAt[i-1]))
	}
	figure(t, "submitted=%d accepted=%d lost=%d duplicates=%d server_restart=%s longest_admission_gap=%s",
		submitted, rep.Accepted, rep.Lost, rep.Duplicates, gap.Round(time.Millisecond), admissionGap.Round(time.Millisecond))
}

// SIGTERM a worker mid-call: calls that finish within the grace period are
// not executed again; the rest are handed back and rerun at once, not
// after AckWait.
func TestSIGTERMHandsBackCalls(t *testing.T) {
	t.Parallel()
	c := faulttest.NewCluster(t)
	const ackWait = 20 * time.Second
	leaving := c.StartWorker(faulttest.WorkerOptions{Name: "leaving", Concurrency: 8, AckWait: ackWait, Grace: time.Second})
	var calls []*toolwirev1.CallRequest
	for i := range 4 {
		calls = append(calls, ledgerCall("ledger_idem", 300, fmt.Sprintf("short%d", i)))
	}
	for i := range 4 {
		calls = append(calls, ledgerCall("ledger_idem", 4000, fmt.Sprintf("long%d", i)))
	}
	ids := submitAll(t, c, calls)
	waitLedger(t, c, "all 8 running", func(es []faulttest.Entry) bool { return len(faulttest.Executions(es)) == 8 })
	require.NoError(t, leaving.Signal(syscall.SIGTERM))
	require.Equal(t, 0, leaving.Wait(t, 30*time.Second), "a drained worker exits 0")
	exited := time.Now()
	c.StartWorker(faulttest.WorkerOptions{Name: "staying", Concurrency: 8, AckWait: ackWait})

	rep := c.Check(t.Context(), len(ids), nonEmpty(ids), 60*time.Second)
	require.Zero(t, rep.Lost)
	require.Equal(t, 8, rep.Outcomes["OK"])
	var worst time.Duration
	for i, id := range ids {
		resp, err := c.Result(t.Context(), id, 0)
		require.NoError(t, err)
		if i < 4 {
			require.Equal(t, 1, rep.Executions[id], "short calls finish in the grace period and never rerun")
			require.Equal(t, "leaving", resp.Meta.Worker)
		} else {
			require.Equal(t, 2, rep.Executions[id], "long calls are handed back and rerun")
			require.Equal(t, "staying", resp.Meta.Worker)
			worst = max(worst, resp.Meta.StartedAt.AsTime().Sub(exited))
		}
	}
	require.Less(t, worst, ackWait/2, "handed-back calls restart at once, not after AckWait")
	figure(t, "handed_back=4 restart_after_exit_max=%s (AckWait %s)", worst.Round(time.Millisecond), ackWait)
}

// A poison tool that crashes its worker on every delivery: exactly
// MaxDeliver attempts, a dead letter and a terminal answer; healthy calls
// are unaffected.
func TestPoisonCallIsDeadLettered(t *testing.T) {
	t.Parallel()
	c := faulttest.NewCluster(t)
	// Concurrency 1: a crash takes down every call in flight in the
	// process, and calls redelivered together stay together; with one
	// slot the poison never shares a process with a healthy call (see
	// docs/reliability.md).
	opts := faulttest.WorkerOptions{Name: "w", Concurrency: 1, AckWait: time.Second, MaxDeliver: 3}
	c.StartWorker(opts)
	c.WaitTool("poison")
	// A supervisor restarts the worker whenever it dies, as Kubernetes would.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			p := c.StartWorker(opts)
			select {
			case <-ctx.Done():
				return
			case <-p.Exited():
			}
		}
	}()
	defer wg.Wait()
	defer cancel()
	poison, err := c.Submit(t.Context(), ledgerCall("poison", 0, "boom"))
	require.NoError(t, err)
	var healthy []*toolwirev1.CallRequest
	for i := range 30 {
		healthy = append(healthy, ledgerCall("ledger_idem", 10, fmt.Sprintf("h%d", i)))
	}
	ids := nonEmpty(submitAll(t, c, healthy))
	resp, err := c.Result(t.Context(), poison, 60*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_MAX_ATTEMPTS, resp.Error.Type)
	require.Equal(t, "dlq", resp.Meta.Source)
	rep := c.Check(t.Context(), len(ids), ids, 60*time.Second)
	require.Zero(t, rep.Lost)
	require.Equal(t, len(ids), rep.Outcomes["OK"])
	require.Equal(t, 3, faulttest.Executions(faulttest.ReadLedger(t, c.Ledger))[poison], "exactly MaxDeliver attempts")
	info, err := c.Bus.DLQ.Info(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 1, info.State.Msgs)
}

// The cancellation matrix, and cancel→stop latency for native tools.
func TestCancellationMatrix(t *testing.T) {
	t.Parallel()
	c := faulttest.NewCluster(t)
	ctx := t.Context()
	id := identity.Default
	cancel := func(callID string) toolwirev1.CancelOutcome {
		out, err := c.Dispatcher.Cancel(ctx, id, callID, "test")
		require.NoError(t, err)
		return out
	}

	// Unknown id (including one cancelled before it was ever published).
	require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_UNKNOWN_CALL, cancel("01J00000000000000000000099"))
	c.StartWorker(faulttest.WorkerOptions{Name: "registrar"}).Kill() // registers the tools, then leaves

	// Queued: cancelled before any worker runs; never executed. The
	// dispatcher answers it at once, so a second cancel finds it finished.
	queued, err := c.Submit(ctx, ledgerCall("ledger", 0, "queued"))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_REQUESTED, cancel(queued))
	require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_ALREADY_FINISHED, cancel(queued), "duplicated cancel is harmless")
	c.StartWorker(faulttest.WorkerOptions{Name: "w", Concurrency: 32, AckWait: 5 * time.Second})
	resp, err := c.Result(ctx, queued, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, resp.Error.Type)
	require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, resp.Error.PartialSideEffects)
	require.Zero(t, faulttest.Executions(faulttest.ReadLedger(t, c.Ledger))[queued])

	// After completion: harmless.
	done, err := c.Submit(ctx, ledgerCall("ledger", 0, "done"))
	require.NoError(t, err)
	resp, err = c.Result(ctx, done, 30*time.Second)
	require.NoError(t, err)
	require.True(t, resp.Ok)
	require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_ALREADY_FINISHED, cancel(done))

	// At start: submit and cancel at once; the call either never runs or
	// stops, and always answers CANCELLED.
	var racing []string
	for i := range 10 {
		rid, err := c.Submit(ctx, ledgerCall("ledger", 5000, fmt.Sprintf("race%d", i)))
		require.NoError(t, err)
		cancel(rid)
		racing = append(racing, rid)
	}
	for _, rid := range racing {
		resp, err := c.Result(ctx, rid, 30*time.Second)
		require.NoError(t, err)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, resp.Error.Type)
	}

	// Mid-execution: cancel→stop latency measured by the tool itself.
	const n = 60
	var running []string
	for i := range n {
		rid, err := c.Submit(ctx, ledgerCall("ledger", 30000, fmt.Sprintf("mid%d", i)))
		require.NoError(t, err)
		running = append(running, rid)
	}
	waitLedger(t, c, "all running", func(es []faulttest.Entry) bool {
		ex := faulttest.Executions(es)
		k := 0
		for _, rid := range running {
			k += ex[rid]
		}
		return k >= 32 // the worker runs 32 at once
	})
	requested := map[string]time.Time{}
	started := map[string]bool{}
	for _, e := range faulttest.ReadLedger(t, c.Ledger) {
		if e.Phase == "start" {
			started[e.CallID] = true
		}
	}
	for _, rid := range running {
		if started[rid] {
			requested[rid] = time.Now()
			require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_REQUESTED, cancel(rid))
		}
	}
	for _, rid := range running {
		if !started[rid] {
			cancel(rid)
		}
		resp, err := c.Result(ctx, rid, 30*time.Second)
		require.NoError(t, err)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, resp.Error.Type)
	}
	var lat []time.Duration
	for _, e := range faulttest.ReadLedger(t, c.Ledger) {
		if at, ok := requested[e.CallID]; ok && e.Phase == "stopped" {
			lat = append(lat, time.Unix(0, e.At).Sub(at))
		}
	}
	require.NotEmpty(t, lat)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p99 := lat[len(lat)/2], lat[(len(lat)*99)/100]
	figure(t, "cancel_to_stop n=%d p50=%s p99=%s", len(lat), p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond))
	require.Less(t, p99, 2*time.Second, "cancellation reaches running work promptly")
}

// Workers scaled to zero past the schedule-to-start timeout: EXPIRED,
// never executed late.
func TestScaledToZeroExpires(t *testing.T) {
	t.Parallel()
	c := faulttest.NewCluster(t)
	w := c.StartWorker(faulttest.WorkerOptions{Name: "w"})
	w.Kill() // registered the tools, then scaled to zero
	var calls []*toolwirev1.CallRequest
	for i := range 20 {
		o := ledgerCall("ledger", 0, fmt.Sprintf("e%d", i))
		o.ScheduleToStart = durationpb.New(300 * time.Millisecond)
		calls = append(calls, o)
	}
	ids := nonEmpty(submitAll(t, c, calls))
	require.Len(t, ids, 20)
	time.Sleep(400 * time.Millisecond) // the fault under test: time passes with no workers
	c.StartWorker(faulttest.WorkerOptions{Name: "w2"})
	rep := c.Check(t.Context(), 20, ids, 30*time.Second)
	require.Zero(t, rep.Lost)
	require.Equal(t, 20, rep.Outcomes[toolwirev1.ErrorType_ERROR_TYPE_EXPIRED.String()])
	for _, id := range ids {
		require.Zero(t, rep.Executions[id], "never executed late")
	}
}
