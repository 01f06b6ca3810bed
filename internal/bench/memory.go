package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Memory is what a dispatcher holds for calls in flight.
type Memory struct {
	// Calls held in flight during the measurement.
	Calls int
	// RawHeap is the growth of the live heap (after GC) while Calls wait,
	// server included.
	RawHeap int64
	// ServerHeap is the growth of the live heap when the same call and
	// ACCEPTED-event bytes are published to the same layout with no
	// dispatcher: what the in-process server holds for them.
	ServerHeap int64
	// Stack is the growth of goroutine stacks while Calls wait: the
	// callers' goroutines blocked in Dispatcher.Call.
	Stack int64
	// Goroutines is the growth of the goroutine count while Calls wait.
	Goroutines int
}

// DispatcherHeap is RawHeap less ServerHeap: the dispatcher's own heap for
// Calls calls in flight.
func (m Memory) DispatcherHeap() int64 { return m.RawHeap - m.ServerHeap }

// Per10k scales a total for Calls calls to 10,000.
func (m Memory) Per10k(total int64) float64 { return float64(total) / float64(m.Calls) * 10000 }

// String summarises m for a report.
func (m Memory) String() string {
	return fmt.Sprintf("dispatcher heap per 10k calls in flight: %.1f MiB (%.0f B/call; raw %.1f MiB less %.1f MiB the in-process server holds); "+
		"caller goroutine stacks: %.1f MiB per 10k (%.2f goroutines/call)",
		m.Per10k(m.DispatcherHeap())/(1<<20), float64(m.DispatcherHeap())/float64(m.Calls),
		m.Per10k(m.RawHeap)/(1<<20), m.Per10k(m.ServerHeap)/(1<<20),
		m.Per10k(m.Stack)/(1<<20), float64(m.Goroutines)/float64(m.Calls))
}

// MeasureMemory measures the dispatcher's memory with calls calls in
// flight (waiting callers of Dispatcher.Call), as follows.
//
// A stack without any worker is started (so nothing executes, nothing
// answers, and no worker memory is counted); then calls goroutines each
// call echo with a 15-minute wait, in waves of 500 so that no burst of
// submissions is refused. Once every call is stored on the calls stream
// and its ACCEPTED record on the events stream, every caller is parked in
// Call with its waiter registered. The live heap after two GCs
// is compared with the one before the calls (RawHeap), as are goroutine
// stacks. The server runs in this process, so RawHeap includes what it
// holds for the stored calls (message cache, dedup ids, per-subject
// state); a control run publishes the same bytes with the same message
// ids and events on a fresh server and no dispatcher, and its growth
// (ServerHeap) is subtracted. The tool does not matter without a worker;
// echo keeps the control's bytes identical.
func MeasureMemory(ctx context.Context, cfg Config, calls int) (Memory, error) {
	cfg = cfg.WithDefaults()
	if calls < 1 {
		return Memory{}, fmt.Errorf("bench: memory: calls %d must be positive", calls)
	}
	p, err := capturePayloads(ctx, cfg)
	if err != nil {
		return Memory{}, err
	}
	return measureMemory(ctx, cfg, p, calls)
}

// measureMemory is MeasureMemory with the payloads already captured.
func measureMemory(ctx context.Context, cfg Config, p payloads, calls int) (Memory, error) {
	m := Memory{Calls: calls}
	var err error
	if m.ServerHeap, err = serverHeap(ctx, cfg, p, calls); err != nil {
		return m, err
	}
	err = dispatcherMemory(ctx, cfg, calls, &m)
	return m, err
}

// memoryWave is how many callers MeasureMemory starts at once.
const memoryWave = 500

func firstErr(errs <-chan error) error {
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

type memSample struct {
	heap, stack int64
	goroutines  int
}

func sample() memSample {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSample{heap: int64(ms.HeapAlloc), stack: int64(ms.StackInuse), goroutines: runtime.NumGoroutine()}
}

func dispatcherMemory(ctx context.Context, cfg Config, calls int, m *Memory) (err error) {
	e, err := startEnv(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, e.close()) }()
	s, err := startStack(ctx, e, stackOptions{})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.stop()) }()

	before := sample()
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	// Stop releases every waiting caller with ErrStopped.
	defer wg.Wait()
	defer func() { // s.stop stops it again and reports its error
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.d.Stop(sctx)
	}()
	// Callers arrive in waves: the memory of calls in flight is the
	// question here, not how a dispatcher takes a burst of submissions.
	for started := 0; started < calls; {
		wave := min(memoryWave, calls-started)
		for range wave {
			wg.Go(func() {
				resp, err := s.d.Call(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: echoArgs}, 15*time.Minute)
				if err == nil {
					err = fmt.Errorf("answered %s while no worker runs: %s", resp.State, resp.Response.GetError().GetMessage())
				}
				if !errors.Is(err, dispatch.ErrStopped) {
					select {
					case errs <- err:
					default:
					}
				}
			})
		}
		started += wave
		// A call's ACCEPTED record is stored once its publish is
		// acknowledged: then its caller waits.
		if err := waitMsgs(ctx, s.bus.Calls, uint64(started)); err != nil {
			return errors.Join(err, firstErr(errs))
		}
		if err := waitMsgs(ctx, s.bus.Events, uint64(started)); err != nil {
			return errors.Join(err, firstErr(errs))
		}
	}
	if err := firstErr(errs); err != nil {
		return fmt.Errorf("bench: memory: a call failed: %w", err)
	}
	after := sample()
	m.RawHeap = after.heap - before.heap
	m.Stack = after.stack - before.stack
	m.Goroutines = after.goroutines - before.goroutines
	return nil
}

// serverHeap is the control: the growth of the heap when the in-process
// server stores calls calls (same bytes, message ids and ACCEPTED events)
// with no dispatcher.
func serverHeap(ctx context.Context, cfg Config, p payloads, calls int) (_ int64, err error) {
	e, err := startEnv(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, e.close()) }()
	nc, err := e.connect("bench-memory-control")
	if err != nil {
		return 0, err
	}
	b, err := bus.Open(ctx, nc, bus.Config{}, bus.Options{})
	if err != nil {
		return 0, err
	}
	if _, err := b.EnsurePool(ctx, bus.PoolConfig{Type: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE}); err != nil {
		return 0, err
	}
	callSubj := b.Subjects.Call(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, identity.Default.Tenant, "builtin", "echo")
	before := sample()
	for i := range calls {
		id := fmt.Sprintf("%0*d", idLen, i+1)
		if _, err := b.JS.PublishAsync(callSubj, p.call.with(id), jetstream.WithMsgID(id), jetstream.WithExpectStream(b.Config.CallsStream())); err != nil {
			return 0, err
		}
		if err := nc.Publish(b.Subjects.Event(identity.Default.Tenant, "bench", id), p.accepted); err != nil {
			return 0, err
		}
	}
	select {
	case <-b.JS.PublishAsyncComplete():
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if err := waitMsgs(ctx, b.Events, uint64(calls)); err != nil {
		return 0, err
	}
	return sample().heap - before.heap, nil
}
