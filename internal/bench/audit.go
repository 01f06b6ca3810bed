package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/bus"
)

// AuditResult is one audit measurement.
type AuditResult struct {
	Calls    int
	Duration time.Duration
	// PeakRSS is the audit process's peak resident memory (VmHWM): the
	// audit runs in a process of its own (this binary with -audit-client),
	// as `toolctl audit` does, so the server's memory is not counted.
	PeakRSS int64
}

// RecordsPerSec is the audit's throughput.
func (r AuditResult) RecordsPerSec() float64 { return float64(r.Calls) / r.Duration.Seconds() }

func (r AuditResult) String() string {
	return fmt.Sprintf("audit of %d calls: %.0f records/s (%s), peak RSS of the audit process %.1f MiB",
		r.Calls, r.RecordsPerSec(), r.Duration.Round(time.Millisecond), float64(r.PeakRSS)/(1<<20))
}

// MeasureAudit makes calls echo calls through the NATS path, then runs an
// audit over all of them (every record encoded as a JSON line, as
// `toolctl audit` prints them, into io.Discard) in a child process
// connected over loopback, and reports its throughput and peak RSS.
func MeasureAudit(ctx context.Context, cfg Config, calls int) (r AuditResult, err error) {
	cfg.Conn = "tcp"
	cfg = cfg.WithDefaults()
	e, err := startEnv(ctx, cfg)
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, e.close()) }()
	s, err := startStack(ctx, e, stackOptions{worker: 256})
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, s.stop()) }()
	if _, _, err := drive(ctx, 256, calls, s.callNATS); err != nil {
		return r, err
	}
	self, err := os.Executable()
	if err != nil {
		return r, fmt.Errorf("bench: audit: %w", err)
	}
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, self, "-audit-client", e.url)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return r, fmt.Errorf("bench: audit client: %w: %s", err, stderr.String())
	}
	var n int
	var secs float64
	var hwm int64
	if _, err := fmt.Sscanf(strings.TrimSpace(out.String()), "AUDITCLIENT records=%d secs=%g hwm_kib=%d", &n, &secs, &hwm); err != nil {
		return r, fmt.Errorf("bench: audit client said %q: %w", out.String(), err)
	}
	if n != calls {
		return r, fmt.Errorf("bench: the audit saw %d of %d calls", n, calls)
	}
	r.Calls, r.Duration, r.PeakRSS = calls, time.Duration(secs*float64(time.Second)), hwm<<10
	return r, nil
}

// AuditClient is the child side of MeasureAudit: it audits every call of
// the installation at url and prints one AUDITCLIENT line.
func AuditClient(ctx context.Context, url string, stdout io.Writer) error {
	nc, err := bus.Dial(bus.ConnConfig{URL: url, Name: "bench-audit"})
	if err != nil {
		return err
	}
	defer nc.Close()
	src, err := audit.Open(ctx, nc, "toolwire")
	if err != nil {
		return err
	}
	enc := json.NewEncoder(io.Discard)
	start := time.Now()
	sum, err := src.Run(ctx, audit.Filter{}, audit.Options{}, func(rec *audit.Record) error { return enc.Encode(rec) })
	if err != nil {
		return err
	}
	if !sum.OK() {
		return fmt.Errorf("bench: audit found %d anomalies", len(sum.Anomalies))
	}
	secs := time.Since(start).Seconds()
	_, err = fmt.Fprintf(stdout, "AUDITCLIENT records=%d secs=%s hwm_kib=%d\n", sum.Records, strconv.FormatFloat(secs, 'f', 6, 64), peakRSSKiB())
	return err
}

// peakRSSKiB is this process's peak resident set (VmHWM). The child's
// rusage is no good here: Linux carries the parent's peak across fork and
// exec into ru_maxrss.
func peakRSSKiB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}
