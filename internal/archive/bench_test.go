package archive_test

import (
	"context"
	"fmt"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolwire/toolwire/internal/archive"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// BenchmarkArchiverThroughput is issue 29's archive throughput: calls
// stored in an embedded JetStream's calls stream (377 bytes of payload, the
// size a call has in the soak of the issue, and two headers),
// then archived by one archiver into a directory store — read from the
// stream, gzipped, written, sealed and signed. It reports messages
// archived a second of wall time and a core-second of process CPU
// (msgs/cpu-s: the figure to hold against the admission rate per core);
// the publishing is not measured.
func BenchmarkArchiverThroughput(b *testing.B) {
	const n = 20000
	ctx := context.Background()
	payload := make([]byte, 377)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	var wall, cpu time.Duration
	var msgs int
	for range b.N {
		b.StopTimer()
		env := bustest.Start(b, shortWindow(time.Hour))
		for i := range n {
			subject := env.Bus.Subjects.Call(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, "acme", "p", fmt.Sprintf("t%d", i))
			msg := &nats.Msg{Subject: subject, Data: payload, Header: nats.Header{"Nats-Msg-Id": {fmt.Sprintf("call-%d", i)},
				"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}
			if _, err := env.Bus.JS.PublishMsgAsync(msg); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-env.Bus.JS.PublishAsyncComplete():
		case <-time.After(time.Minute):
			b.Fatal("publishing timed out")
		}
		// Segments of a second: the last one closes a second after the
		// last publish. Time must pass; there is nothing to wait on.
		time.Sleep(1100 * time.Millisecond)
		store, err := archive.OpenBucket(ctx, b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start, cpu0 := time.Now(), processCPU()
		a := archive.New(archive.Config{Bus: env.Bus, Store: store, Name: "bench", Segment: time.Second, Settle: time.Millisecond,
			Every: 50 * time.Millisecond, HoldAhead: time.Minute, Logger: slog.New(slog.DiscardHandler)})
		if err := a.Start(ctx); err != nil {
			b.Fatal(err)
		}
		for a.Progress()[env.Bus.Config.CallsStream()].ToSeq < n {
			select {
			case <-a.Passed():
			case <-time.After(time.Minute):
				b.Fatal("the archiver did not catch up")
			}
		}
		wall += time.Since(start)
		cpu += processCPU() - cpu0
		msgs += n
		b.StopTimer()
		if err := a.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		store.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(msgs)/wall.Seconds(), "msgs/s")
	b.ReportMetric(float64(msgs)/cpu.Seconds(), "msgs/cpu-s")
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
