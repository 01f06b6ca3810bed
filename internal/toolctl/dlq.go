package toolctl

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dlq"
	"github.com/toolwire/toolwire/pkg/client"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// natsFlags say how the dlq commands reach NATS.
type natsFlags struct {
	url, creds, prefix, data string
}

func (a *app) dlqCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "List, show and retry dead letters (talks to NATS directly)",
		Long: `List, show and retry the dead letters of an installation: the calls that
exhausted their attempts or were terminated (undecodable, inconsistent, of
an unknown spec version), as workers and the dispatcher record them in the
DLQ stream. These operator commands talk to NATS directly: --nats-url (env
TOOLWIRE_NATS_URL), --nats-creds (env TOOLWIRE_NATS_CREDS) and --prefix
(env TOOLWIRE_PREFIX) say where. Without --nats-creds, on a loopback URL,
they use the operator credentials a dispatcher with --nats-listen made
under its data directory (--data, env TOOLWIRE_DATA, default ./data):
<data>/credentials/operator.nk. They never create or change a stream, and
'retry' asks a dispatcher to queue the call again (operator credentials may
not publish calls).`,
		PersistentPreRunE: a.setupNATS,
	}
	a.natsFlags(cmd)
	cmd.AddCommand(a.dlqListCommand(), a.dlqShowCommand(), a.dlqRetryCommand())
	return cmd
}

// natsFlags adds the flags of the commands that talk to NATS directly.
func (a *app) natsFlags(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&a.nats.url, "nats-url", DefaultNATSURL, "NATS URL(s), comma-separated (env TOOLWIRE_NATS_URL)")
	f.StringVar(&a.nats.creds, "nats-creds", "", "NATS credentials file (env TOOLWIRE_NATS_CREDS)")
	f.StringVar(&a.nats.prefix, "prefix", "toolwire", "subject and stream prefix of the installation (env TOOLWIRE_PREFIX)")
	f.StringVar(&a.nats.data, "data", "data", "the dispatcher's data directory: without --nats-creds and with a loopback --nats-url, use its credentials/operator.nk (env TOOLWIRE_DATA)")
}

// setupNATS connects (see connectNATS) and attaches to the installation's
// DLQ.
func (a *app) setupNATS(cmd *cobra.Command, _ []string) error {
	if err := a.connectNATS(cmd); err != nil {
		return err
	}
	q, err := dlq.Open(cmd.Context(), a.nc, a.nats.prefix)
	if err != nil {
		return &requestError{err}
	}
	a.queue = q
	return nil
}

// connectNATS resolves the NATS flags against the environment and
// connects.
func (a *app) connectNATS(cmd *cobra.Command) error {
	if err := a.resolveNATS(cmd); err != nil {
		return err
	}
	// A command is short-lived: no watchdog; Dial bounds a write to a
	// silent server, and a lost or moved connection is said on stderr.
	warnings := slog.New(slog.NewTextHandler(a.io.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	nc, err := bus.Dial(bus.ConnConfig{URL: a.nats.url, CredsFile: a.nats.creds, Name: "toolctl",
		InboxPrefix: bus.InboxPrefix(bus.Config{Prefix: a.nats.prefix}, bus.RoleOperator), Monitor: bus.NewConnMonitor(warnings)})
	if err != nil {
		return &requestError{err}
	}
	a.nc = nc
	return nil
}

// resolveNATS resolves the NATS flags against the environment: the URL,
// the credentials (on a loopback URL without --nats-creds, the operator's
// under the data directory) and the prefix.
func (a *app) resolveNATS(cmd *cobra.Command) error {
	if err := a.setupCommon(cmd); err != nil {
		return err
	}
	for _, e := range []struct {
		flag, env string
		dst       *string
	}{
		{"nats-url", "TOOLWIRE_NATS_URL", &a.nats.url},
		{"nats-creds", "TOOLWIRE_NATS_CREDS", &a.nats.creds},
		{"prefix", "TOOLWIRE_PREFIX", &a.nats.prefix},
		{"data", "TOOLWIRE_DATA", &a.nats.data},
	} {
		if v, ok := a.io.LookupEnv(e.env); ok && v != "" && !cmd.Flags().Changed(e.flag) {
			*e.dst = v
		}
	}
	if err := (bus.Config{Prefix: a.nats.prefix}).WithDefaults().Validate(); err != nil {
		return fmt.Errorf("--prefix: %w", err)
	}
	if a.nats.creds == "" {
		// On the dispatcher's machine: the operator credentials it made.
		a.nats.creds = bus.LocalCredentials(a.nats.data, bus.RoleOperator, a.nats.url)
	}
	return nil
}

func (a *app) dlqListCommand() *cobra.Command {
	var opts dlq.ListOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead letters, oldest first",
		Long: `List the newest dead letters (--limit), oldest first. With -o text: one row
each with the sequence (for 'dlq show' and 'dlq retry'), time, tool, call
id, attempts and reason. With -o json: one object per line with seq,
subject, stored and deadLetter (the DeadLetter as protobuf JSON), and
rawBytesWithheld for an undecodable call. Secret arguments are redacted as
'dlq show' says.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Limit < 0 {
				return fmt.Errorf("--limit %d: must not be negative", opts.Limit)
			}
			letters, err := a.queue.List(cmd.Context(), opts)
			if err != nil {
				return &requestError{err}
			}
			if a.json() {
				for _, l := range letters {
					if err := a.printLetterLine(cmd.Context(), l); err != nil {
						return err
					}
				}
				return nil
			}
			tw := tabwriter.NewWriter(a.io.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SEQ\tTIME\tTOOL\tCALL ID\tATTEMPTS\tREASON")
			for _, l := range letters {
				shown, _ := a.queue.Shown(cmd.Context(), l)
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\n", l.Seq, l.Time().Local().Format(time.RFC3339), l.Tool(),
					cmp.Or(l.Record.GetCall().GetCallId(), "-"), l.Record.GetAttempts(), reason(shown))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().IntVar(&opts.Limit, "limit", 50, "list at most this many, the newest (0 = all)")
	cmd.Flags().StringVar(&opts.Tool, "tool", "", "list only the dead calls of this tool")
	return cmd
}

// reason is the reason of a dead letter on one line, with its last error.
func reason(dl *toolwirev1.DeadLetter) string {
	s := dl.GetReason()
	if te := dl.GetLastError(); te != nil {
		s += " (" + client.TypeName(te.GetType())
		if m := te.GetMessage(); m != "" && m != dl.GetReason() {
			s += ": " + m
		}
		s += ")"
	}
	return strings.Join(strings.Fields(s), " ")
}

// printLetterLine prints a letter, redacted (dlq.Queue.Shown), as one
// JSON object on one line.
func (a *app) printLetterLine(ctx context.Context, l *dlq.Letter) error {
	shown, withheld := a.queue.Shown(ctx, l)
	rec, err := protojson.Marshal(shown)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	doc, err := json.Marshal(struct {
		Seq         uint64          `json:"seq"`
		Subject     string          `json:"subject"`
		Stored      time.Time       `json:"stored"`
		DeadLetter  json.RawMessage `json:"deadLetter"`
		RawWithheld int             `json:"rawBytesWithheld,omitempty"`
	}{l.Seq, l.Subject, l.Stored.UTC(), rec, withheld})
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	return a.printJSONLine(doc)
}

func parseSeq(arg string) (uint64, error) {
	seq, err := strconv.ParseUint(arg, 10, 64)
	if err != nil || seq == 0 {
		return 0, fmt.Errorf("SEQ %q: want a positive stream sequence, as 'toolctl dlq list' prints", arg)
	}
	return seq, nil
}

// letterError reports a dead letter that does not exist or cannot be
// retried as an answer (exit 1), anything else as no answer.
func (a *app) letterError(err error) error {
	if errors.Is(err, dlq.ErrNotFound) || errors.Is(err, dlq.ErrNotRetryable) {
		fmt.Fprintf(a.io.Stderr, "error: %v\n", err)
		return exitCode(ExitToolError)
	}
	if errors.Is(err, dlq.ErrSessionInactive) || errors.Is(err, dlq.ErrModeRestricted) || errors.Is(err, dlq.ErrPolicyDenies) {
		fmt.Fprintf(a.io.Stderr, "error: nothing was queued: %v\n", err)
		return exitCode(ExitToolError)
	}
	return &requestError{err}
}

func (a *app) dlqShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show SEQ",
		Short: "Print one dead letter",
		Long: `Print the dead letter at stream sequence SEQ as protobuf JSON: the call
(its arguments base64-encoded, as protobuf JSON writes bytes), the reason,
the last error, the attempts, the time and the worker. With -o text the
arguments also follow on stderr as text.

Secret arguments are redacted as 'toolctl audit' redacts them: the fields
the spec version's input schema marks secret show "[REDACTED]", and their
values are replaced in the reason and the last error; when the spec
version is no longer in the registry, the arguments are redacted whole.
The raw bytes of an undecodable call are withheld (their size is printed
on stderr). 'dlq retry' runs the call as stored.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			seq, err := parseSeq(args[0])
			if err != nil {
				return err
			}
			l, err := a.queue.Get(cmd.Context(), seq)
			if err != nil {
				return a.letterError(err)
			}
			shown, withheld := a.queue.Shown(cmd.Context(), l)
			if err := a.printProto(shown); err != nil {
				return err
			}
			if args := shown.GetCall().GetArguments(); !a.json() && len(args) > 0 && utf8.Valid(args) {
				fmt.Fprintf(a.io.Stderr, "arguments: %s\n", args)
			}
			if withheld > 0 {
				fmt.Fprintf(a.io.Stderr, "raw: %d bytes of an undecodable call withheld (they may hold secret arguments)\n", withheld)
			}
			return nil
		},
	}
}

func (a *app) dlqRetryCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "retry SEQ",
		Short: "Run a dead-lettered call again, as a new call",
		Long: `Queue the call of the dead letter at SEQ again as a new call and print the
new call id; fetch its result with 'toolctl get ID --wait 1m'.

The new call has a fresh id and the same tool, spec version, arguments,
caller and routing; its attempts start again and it counts as accepted
now. Its schedule-to-start and schedule-to-close deadlines are dropped
(they date from the original acceptance), and so is its idempotency key
(it names the original call). The dead letter stays. A dead letter whose
call could not be decoded cannot be retried (exit 1).

The dispatcher decides the retry as it decides the approval of a parked
call: a call whose session has ended is refused SESSION_INACTIVE, one the
session's mode now forbids MODE_RESTRICTED, one the policy in force now
denies PERMISSION_DENIED; nothing is queued (exit 1).

A dispatcher of the installation queues the call: toolctl sends it the
request over NATS (operator credentials may not publish calls), so one
must be running.

With -o json it prints a SubmitResponse with the new call id.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			seq, err := parseSeq(args[0])
			if err != nil {
				return err
			}
			// A dispatcher queues it: operator credentials may not publish calls.
			id, err := a.queue.RequestRetry(cmd.Context(), seq)
			if id == "" {
				return a.letterError(err)
			}
			if a.json() {
				if err := a.printProto(&toolwirev1.SubmitResponse{CallId: id}); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(a.io.Stdout, id)
			}
			if err != nil { // queued, but without its admission record
				fmt.Fprintf(a.io.Stderr, "warning: %v\nfetch its result with a wait: toolctl get %s --wait 1m\n", err, id)
			}
			return nil
		},
	}
}
