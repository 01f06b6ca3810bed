package toolctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/spf13/cobra"

	"github.com/toolwire/toolwire/internal/audit"
)

func (a *app) auditCommand() *cobra.Command {
	var (
		since, until string
		f            audit.Filter
		o            audit.Options
		verify       bool
		export       string
		rejected     bool
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Stream, verify and export the audit trail (talks to NATS directly)",
		Long: `Stream the audit trail of an installation as JSON lines: one record per
call admitted in the range (oldest first) with the call (arguments with
secret values redacted), its admission, optionally its events (--events),
its terminal response and its outcome (ok, error, cancelled, expired,
dead_lettered, pending, missing). Filters combine.

--verify checks completeness instead of printing records: every accepted
call has its terminal result and the calls stream has no gaps; it prints
a summary with counts per outcome and every anomaly, and exits 1 when there
is one. A call without a result younger than --settle is pending, not
missing.

Each record's "policy" says why the call was allowed: the policy version
in force and the rule that allowed it (or the grant or approval that
covered an ask); it is absent when no policy was in force. --rejected
prints the calls admission refused instead (their REJECTED events: outcome
"rejected", the error answered and, for a policy refusal, the policy
version, the rule and the reason the caller was told); with --archive
the REJECTED events the events stream no longer holds are read from the
archive, as one record with the live ones.

--export DIR writes the records and a manifest (counts and the SHA-256 of
the records) into DIR, for 'toolctl audit verify-export DIR' later.

With --archive (env TOOLWIRE_ARCHIVE; the store the dispatchers'
--archive names) the record is the archive and the live streams as one:
calls older than the calls stream's window are read from the archive's
segments, the rest live, with no duplicate and no gap at the boundary, and
results and events the streams no longer hold are looked up in the
archive and checked as live ones. --verify then also verifies the
archive's chains (signatures, links, hashes) whole, from their first
segment, whatever --since and --until (a chain is only sound as a whole):
each problem, and a segment signer that is no enrolled dispatcher's key,
is an anomaly. Without it, the record is what the streams still hold.
--call-id alone (no --since, --until) reads around the time in the id
(from a minute before to 25 hours after: a parked call is published when
approved, within the approval TTL, 24h by default), not the whole record;
give --since and --until for a call published later.

Like 'dlq', it reads JetStream directly: --nats-url, --nats-creds, --prefix.
Memory stays constant whatever the range. A progress line is shown on a
terminal.`,
		Example: `  toolctl audit --since 1h --tool send_email
  toolctl audit --since 2026-11-01T00:00:00Z --until 2026-11-02T00:00:00Z --verify
  toolctl audit --tenant acme --session s-42 --events
  toolctl audit --since 24h --export ./audit-2026-11-21
  toolctl audit --archive s3://acme-toolwire-archive?region=eu-west-1 --since 2026-06-01T00:00:00Z --until 2026-07-01T00:00:00Z --verify
  toolctl audit --since 1h --rejected --outcome PERMISSION_DENIED`,
		Args: cobra.NoArgs,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.connectNATS(cmd)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			now := time.Now()
			if err := parseRange(since, until, now, &f); err != nil {
				return err
			}
			byCallIDTime(&f)
			if rejected && (verify || export != "") {
				return errors.New("--rejected lists refusals; it does not combine with --verify or --export")
			}
			src, done, err := a.openAudit(cmd)
			if err != nil {
				return err
			}
			defer done()
			o.Progress = a.progress(now)
			o.Verify = verify
			if rejected {
				enc := json.NewEncoder(a.io.Stdout)
				_, err := src.Refusals(cmd.Context(), f, o, func(r *audit.Record) error { return enc.Encode(r) })
				a.endProgress()
				if err != nil {
					return &requestError{err}
				}
				return nil
			}
			var emit func(*audit.Record) error
			var exp *audit.Exporter
			switch {
			case export != "":
				if exp, err = audit.NewExporter(export); err != nil {
					return err
				}
				emit = exp.Write
			case verify:
				emit = func(*audit.Record) error { return nil }
			default:
				enc := json.NewEncoder(a.io.Stdout)
				emit = func(r *audit.Record) error { return enc.Encode(r) }
			}
			sum, err := src.Run(cmd.Context(), f, o, emit)
			a.endProgress()
			if err != nil {
				return &requestError{err}
			}
			if exp != nil {
				m, err := exp.Close(f, sum)
				if err != nil {
					return err
				}
				fmt.Fprintf(a.io.Stderr, "exported %d records to %s (sha256 %s)\n", m.Records, export, m.SHA256)
			}
			if verify || exp != nil {
				a.printSummary(a.io.Stdout, sum)
			}
			if verify && !sum.OK() {
				return exitCode(ExitToolError)
			}
			return nil
		},
	}
	a.natsFlags(cmd)
	a.archiveFlag(cmd)
	fl := cmd.Flags()
	fl.StringVar(&since, "since", "", "calls admitted at or after: RFC 3339 time or a duration before now (1h)")
	fl.StringVar(&until, "until", "", "calls admitted at or before: RFC 3339 time or a duration before now")
	fl.StringVar(&f.Tenant, "tenant", "", "only this tenant")
	fl.StringVar(&f.Session, "session", "", "only this session")
	fl.StringVar(&f.Agent, "agent", "", "only this agent")
	fl.StringVar(&f.Tool, "tool", "", "only this tool")
	fl.StringVar(&f.CallID, "call-id", "", "only this call")
	fl.StringVar(&f.Outcome, "outcome", "", "only this outcome (ok, error, cancelled, expired, dead_lettered, pending, missing) or error type (TIMEOUT)")
	fl.BoolVar(&o.Events, "events", false, "add every call's lifecycle events (slower: one read per call)")
	fl.DurationVar(&o.Settle, "settle", 10*time.Minute, "a call without a result is pending, not missing, for this long after admission")
	fl.BoolVar(&rejected, "rejected", false, "print the calls admission refused (REJECTED events) instead of the admitted ones")
	fl.BoolVar(&verify, "verify", false, "check completeness and print a summary instead of the records")
	fl.StringVar(&export, "export", "", "write the records and a manifest into this (new or empty) directory")
	cmd.AddCommand(a.auditVerifyExportCommand())
	return cmd
}

func (a *app) auditVerifyExportCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "verify-export DIR",
		Short: "Check an audit export against its manifest (SHA-256, counts)",
		Args:  cobra.ExactArgs(1),
		// Works offline: no NATS needed.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return a.setupCommon(cmd) },
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := audit.VerifyExport(args[0])
			if err != nil {
				fmt.Fprintf(a.io.Stderr, "error: %v\n", err)
				return exitCode(ExitToolError)
			}
			fmt.Fprintf(a.io.Stdout, "export %s verified: %d records, sha256 %s, %d anomalies recorded at export\n",
				args[0], m.Records, m.SHA256, len(m.Anomalies))
			return nil
		},
	}
}

// parseRange sets f's time range from the --since and --until flags.
func parseRange(since, until string, now time.Time, f *audit.Filter) error {
	var err error
	if f.Since, err = parseWhen(since, now); err != nil {
		return fmt.Errorf("--since: %w", err)
	}
	if f.Until, err = parseWhen(until, now); err != nil {
		return fmt.Errorf("--until: %w", err)
	}
	return nil
}

// callIDReach is how long after the time in a call id (a ULID: the
// admitting dispatcher's clock) a call looked up by --call-id alone is
// searched for: a parked call is published when it is approved, up to
// the approval TTL (24h by default) after admission, and an hour for
// clock skew and a publish confirmed late.
const callIDReach = 25 * time.Hour

// byCallIDTime bounds f's range to the time in f.CallID (less a minute,
// plus callIDReach) when it names a call and no range was given: a call
// looked up by id reads the segments and the part of the stream around
// its time, not the whole record.
func byCallIDTime(f *audit.Filter) {
	id, err := ulid.ParseStrict(f.CallID)
	if err != nil || !f.Since.IsZero() || !f.Until.IsZero() {
		return
	}
	t := ulid.Time(id.Time())
	f.Since, f.Until = t.Add(-time.Minute), t.Add(callIDReach)
}

// parseWhen reads an RFC 3339 time or a duration before now; "" is zero.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: a duration before now must be positive", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a duration", s)
	}
	return t, nil
}

func (a *app) printSummary(w io.Writer, s *audit.Summary) {
	fmt.Fprintf(w, "calls: %d (CALLS sequences %d-%d, %d messages read, %d retry re-entries)\n",
		s.Records, s.FirstSeq, s.LastSeq, s.Scanned, s.RetryEntries)
	for _, o := range slices.Sorted(maps.Keys(s.Outcomes)) {
		fmt.Fprintf(w, "  %-14s %d\n", o, s.Outcomes[o])
	}
	if s.OK() {
		fmt.Fprintln(w, "anomalies: none")
		return
	}
	fmt.Fprintf(w, "anomalies: %d\n", len(s.Anomalies))
	for _, an := range s.Anomalies {
		fmt.Fprintf(w, "  %s %s seq %d: %s\n", an.Kind, an.CallID, an.Seq, an.Detail)
	}
}

// progress returns a progress callback that draws one line on a terminal,
// or nil when stderr is not one.
func (a *app) progress(start time.Time) func(int) {
	f, ok := a.io.Stderr.(*os.File)
	if !ok {
		return nil
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return func(n int) {
		rate := float64(n) / max(time.Since(start).Seconds(), 1e-3)
		fmt.Fprintf(f, "\r%s", strings.TrimSpace(fmt.Sprintf("audit: %d calls read, %.0f/s", n, rate)))
	}
}

func (a *app) endProgress() {
	if a.progress(time.Now()) != nil {
		fmt.Fprintln(a.io.Stderr)
	}
}
