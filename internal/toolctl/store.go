package toolctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/toolwire/toolwire/internal/archive"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/capacity"
)

func (a *app) storeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Show the streams' and buckets' use and growth (talks to NATS directly)",
		Long: `Inspect the JetStream stores of an installation. Like 'dlq', it reads
JetStream directly as the operator: --nats-url, --nats-creds, --prefix.`,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.connectNATS(cmd)
		},
	}
	a.natsFlags(cmd)
	cmd.AddCommand(a.storeStatusCommand())
	return cmd
}

func (a *app) storeStatusCommand() *cobra.Command {
	var sample time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Per stream and bucket: bytes, messages, limits, use, bytes per call, time to full",
		Long: `Print every stream and bucket of the installation (and the JetStream
account, when it has a storage limit): bytes and messages stored, their
limits, the use of the nearer limit, and — from two readings --sample apart
(default 5s) — the net growth per second, the bytes the store took per
call written to the calls stream, and the time until it is full at that
rate. "-" is unknown or unbounded: no rate measured, no call in the
sample, the account's messages (not counted). ARCHIVE LAG is, for the
calls, results and events streams once an archiver has run (the archive
bucket exists), the age of the stream's oldest message not yet archived
(0 when caught up), read as the dispatchers read it for
toolwire_archive_lag_seconds; "-" for the other stores and without an
archive, and for all of them, with a warning on stderr, when it could not
be read. --sample 0 reads once and measures no rate.

FULL IN is "full" when the store takes no more: JetStream stops a store
just under its limit, so a full store reads a little under 100%. The calls
stream, the idempotency bucket and the account count as full at 90% of
their byte limit (the dispatchers' high-water), where new calls are
refused. "never" is a store that does not fill at this rate: it does
not grow, or what it takes within its age limit (events 72h, cancels 24h)
at its write rate is under its limit.

The rate is the last few seconds' only: a quiet moment reads as no growth.
The dispatcher's metrics (toolwire_store_*) give it over 10 minutes.

With -o text, a table; with -o json, one object per store and line.`,
		Example: `  toolctl store status
  toolctl store status --sample 30s -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sample < 0 {
				return fmt.Errorf("--sample %s: must not be negative", sample)
			}
			status, err := a.readCapacity(cmd.Context(), sample)
			if err != nil {
				return &requestError{err}
			}
			if a.json() {
				enc := json.NewEncoder(a.io.Stdout)
				for _, s := range status {
					if err := enc.Encode(storeJSON(s)); err != nil {
						return err
					}
				}
				return nil
			}
			return a.printStoreTable(status, sample)
		},
	}
	cmd.Flags().DurationVar(&sample, "sample", 5*time.Second, "measure the growth between two readings this far apart (0 = one reading, no rate)")
	return cmd
}

// readCapacity reads the stores twice, sample apart (once when sample is
// 0), and returns their status (full at the dispatchers' default
// high-water, capacity.DefaultHighWater).
func (a *app) readCapacity(ctx context.Context, sample time.Duration) ([]capacity.Status, error) {
	js, err := jetstream.New(a.nc)
	if err != nil {
		return nil, err
	}
	c := bus.Config{Prefix: a.nats.prefix}
	first, err := capacity.Read(ctx, js, c)
	if err != nil {
		return nil, err
	}
	if sample == 0 {
		status := capacity.Compute(capacity.Sample{}, first, capacity.DefaultHighWater)
		a.archiveLags(ctx, js, c, status)
		return status, nil
	}
	t := time.NewTimer(sample)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	last, err := capacity.Read(ctx, js, c)
	if err != nil {
		return nil, err
	}
	status := capacity.Compute(first, last, capacity.DefaultHighWater)
	a.archiveLags(ctx, js, c, status)
	return status, nil
}

// archiveLags is readArchiveLags, whose error is a warning on stderr: the
// stores' status is shown without the lag ("-"), as it was before the
// operator could read it (an older chart's credential).
func (a *app) archiveLags(ctx context.Context, js jetstream.JetStream, c bus.Config, status []capacity.Status) {
	if err := readArchiveLags(ctx, js, c, status); err != nil {
		for i := range status {
			status[i].ArchiveLag = -1
		}
		fmt.Fprintf(a.io.Stderr, "toolctl: the archive's lag was not read: %v\n", err)
	}
}

// readArchiveLags fills the ArchiveLag of the archived streams' status (calls,
// results, events) when an archiver has made the archive bucket: the age
// of each stream's oldest message after the sequence the archive's
// progress records (archive.OldestUnarchived), 0 when caught up.
func readArchiveLags(ctx context.Context, js jetstream.JetStream, c bus.Config, status []capacity.Status) error {
	kv, err := js.KeyValue(ctx, archive.Bucket(c.Prefix))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("the archive bucket: %w", err)
	}
	names := []string{c.CallsStream(), c.ResultsStream(), c.EventsStream()}
	progress, err := archive.ReadProgress(ctx, kv, names...)
	if err != nil {
		return err
	}
	for i := range status {
		s := &status[i]
		if !slices.Contains(names, s.Stream) {
			continue
		}
		stream, err := js.Stream(ctx, s.Stream)
		if err != nil {
			return fmt.Errorf("stream %s: %w", s.Stream, err)
		}
		oldest, err := archive.OldestUnarchived(ctx, stream, stream.CachedInfo().State, progress[s.Stream].ToSeq)
		if err != nil {
			return err
		}
		s.ArchiveLag = 0
		if !oldest.IsZero() {
			s.ArchiveLag = max(time.Since(oldest), 0)
		}
	}
	return nil
}

func (a *app) printStoreTable(status []capacity.Status, sample time.Duration) error {
	tw := tabwriter.NewWriter(a.io.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STORE\tBYTES\tMAX BYTES\tMSGS\tMAX MSGS\tUSED\tB/CALL\tGROWTH/S\tFULL IN\tARCHIVE LAG")
	for _, s := range status {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, humanBytes(float64(s.Bytes)), limit(s.MaxBytes, true),
			messages(s), limit(s.MaxMessages, false), percent(s.Used), perCall(s), growth(s), fullIn(s), lag(s.ArchiveLag))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if sample > 0 {
		fmt.Fprintf(a.io.Stderr, "growth, bytes per call and time to full measured over %s\n", sample)
	}
	return nil
}

// storeStatus is a store's status as `store status -o json` prints it:
// null for what is unknown or unbounded.
type storeStatus struct {
	Store                string   `json:"store"`
	Stream               string   `json:"stream"`
	Bytes                uint64   `json:"bytes"`
	Messages             *uint64  `json:"messages"`
	MaxBytes             *int64   `json:"maxBytes"`
	FullAtBytes          *int64   `json:"fullAtBytes"`
	MaxMessages          *int64   `json:"maxMessages"`
	Used                 *float64 `json:"used"`
	MeasuredSeconds      *float64 `json:"measuredSeconds"`
	GrowthBytesPerSecond *float64 `json:"growthBytesPerSecond"`
	BytesPerCall         *float64 `json:"bytesPerCall"`
	SecondsToFull        *float64 `json:"secondsToFull"`
	ArchiveLagSeconds    *float64 `json:"archiveLagSeconds"`
}

func storeJSON(s capacity.Status) storeStatus {
	out := storeStatus{Store: s.Name, Stream: s.Stream, Bytes: s.Bytes}
	if !s.IsAccount() {
		out.Messages = &s.Messages
	}
	if s.MaxBytes >= 0 {
		out.MaxBytes, out.FullAtBytes = &s.MaxBytes, &s.FullBytes
	}
	if s.MaxMessages >= 0 {
		out.MaxMessages = &s.MaxMessages
	}
	if s.Used >= 0 {
		out.Used = &s.Used
	}
	if s.TimeToFull >= 0 {
		out.SecondsToFull = ptr(s.TimeToFull.Seconds())
	}
	if s.ArchiveLag >= 0 {
		out.ArchiveLagSeconds = ptr(s.ArchiveLag.Seconds())
	}
	if !s.Measured {
		return out
	}
	out.MeasuredSeconds, out.GrowthBytesPerSecond = ptr(s.Over.Seconds()), &s.GrowthBytes
	if s.BytesPerCall >= 0 {
		out.BytesPerCall = &s.BytesPerCall
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// humanBytes renders n bytes in the largest binary unit under it.
func humanBytes(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for ; i < len(units)-1 && (n >= 1024 || n <= -1024); i++ {
		n /= 1024
	}
	if i == 0 {
		return strconv.FormatFloat(n, 'f', 0, 64) + units[0]
	}
	return strconv.FormatFloat(n, 'f', 1, 64) + units[i]
}

func limit(n int64, isBytes bool) string {
	switch {
	case n < 0:
		return "-"
	case isBytes:
		return humanBytes(float64(n))
	}
	return strconv.FormatInt(n, 10)
}

func percent(used float64) string {
	if used < 0 {
		return "-"
	}
	return strconv.FormatFloat(100*used, 'f', 1, 64) + "%"
}

func perCall(s capacity.Status) string {
	if !s.Measured || s.BytesPerCall < 0 {
		return "-"
	}
	return strconv.FormatFloat(s.BytesPerCall, 'f', 0, 64)
}

func growth(s capacity.Status) string {
	if !s.Measured {
		return "-"
	}
	if s.GrowthBytes > 0 {
		return "+" + humanBytes(s.GrowthBytes)
	}
	return humanBytes(s.GrowthBytes)
}

// messages is the store's message count; "-" for the account's (not
// counted).
func messages(s capacity.Status) string {
	if s.IsAccount() {
		return "-"
	}
	return strconv.FormatUint(s.Messages, 10)
}

func fullIn(s capacity.Status) string {
	switch {
	case s.TimeToFull == 0:
		return "full"
	case s.TimeToFull > 0:
		return approx(s.TimeToFull)
	case s.Measured && (s.MaxBytes > 0 || s.MaxMessages > 0):
		return "never"
	}
	return "-"
}

func lag(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return approx(d)
}

// approx renders d to two units at most: 45s, 12m30s, 5h20m, 3d4h.
func approx(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < day:
		return trimZero(d.Round(time.Minute).String())
	}
	d = d.Round(time.Hour)
	return fmt.Sprintf("%dd%dh", d/day, (d%day)/time.Hour)
}

// trimZero drops a Duration string's trailing "0s".
func trimZero(s string) string {
	if len(s) > 2 && s[len(s)-2:] == "0s" {
		return s[:len(s)-2]
	}
	return s
}
