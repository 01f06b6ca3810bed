package toolctl

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// poolCommand lists, pauses and resumes worker pools (internal/dispatch
// doc.go, "Paused pools").
func (a *app) poolCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pool",
		Short: "List worker pools; pause and resume one",
	}
	cmd.AddCommand(a.poolListCommand(), a.poolPauseCommand(), a.poolResumeCommand())
	return cmd
}

func (a *app) poolListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the worker pools, their queues and pauses",
		Long: `List the worker pools as the answering dispatcher last read them: calls
queued and in flight, and whether the pool is paused, by whom, since when
and why. A pause made outside toolwire (through the NATS API) is shown
under CHANGED. Needs credentials with the "installation" scope.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pools, err := a.client.ListPools(cmd.Context())
			if err != nil {
				return a.poolErr(err)
			}
			if a.json() {
				return a.printProto(&toolwirev1.ListPoolsResponse{Pools: pools})
			}
			tw := tabwriter.NewWriter(a.io.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "POOL\tQUEUED\tIN FLIGHT\tPAUSED\tBY\tSINCE\tREASON\tCHANGED")
			for _, p := range pools {
				paused, since := "no", ""
				if p.GetPaused() {
					paused = "yes"
				}
				if p.GetPausedAt() != nil {
					since = stamp(p.GetPausedAt().AsTime())
				}
				// By, reason and drift are an admin's text, or a hand edit's
				// (the operator credential writes the metadata too): no
				// terminal escapes reach the terminal.
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", printable(p.GetName()), p.GetQueued(), p.GetInFlight(), paused,
					printable(p.GetPausedBy()), since, printable(firstLine(p.GetPauseReason())), printable(p.GetPauseDrift()))
			}
			return tw.Flush()
		},
	}
}

func (a *app) poolPauseCommand() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "pause POOL [--reason TEXT]",
		Short: "Pause a pool: its workers take no calls until it is resumed",
		Long: `Pause a worker pool for every dispatcher and worker: its workers are
delivered no call, calls already queued wait for the resume, and new calls
to the pool are refused OVERLOADED (retryable, retry_after 30s) naming the
pause. The pause is recorded with your key's tenant/agent, the time and the
reason, and shown by 'toolctl pool list' and the dashboard's pools page.
Needs credentials with the "admin" and "installation" scopes.`,
		Example: `  toolctl pool pause mcp --reason "upstream incident"
  toolctl pool resume mcp`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := a.client.PausePool(cmd.Context(), args[0], reason)
			if err != nil {
				return a.poolErr(err)
			}
			if a.json() {
				return a.printProto(resp)
			}
			fmt.Fprintf(a.io.Stdout, "paused pool %s (by %s at %s)\n", args[0], resp.GetPausedBy(), stamp(resp.GetPausedAt().AsTime()))
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded with the pause (at most 512 bytes)")
	return cmd
}

func (a *app) poolResumeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "resume POOL",
		Short: "Resume a paused pool: its queued calls run",
		Long: `End a pool's pause: its queued calls are delivered again and new calls
admitted. Needs credentials with the "admin" and "installation" scopes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.client.ResumePool(cmd.Context(), args[0]); err != nil {
				return a.poolErr(err)
			}
			if a.json() {
				return a.printProto(&toolwirev1.ResumePoolResponse{})
			}
			fmt.Fprintf(a.io.Stdout, "resumed pool %s\n", args[0])
			return nil
		},
	}
}

// poolErr reports a refusal (no such pool, missing scope, bad reason, a
// pause other changes kept undoing) with exit 1; other errors got no
// answer.
func (a *app) poolErr(err error) error {
	switch connect.CodeOf(err) {
	case connect.CodeNotFound, connect.CodePermissionDenied, connect.CodeInvalidArgument, connect.CodeAborted:
		fmt.Fprintf(a.io.Stderr, "error: %v\n", err)
		return exitCode(ExitToolError)
	}
	return &requestError{err}
}

// printable is s with its control and format characters (ESC, tab, CR,
// bidi overrides: unicode Cc and Cf) written as Go escapes (\x1b,
// \u202e), for a terminal.
func printable(s string) string {
	if !strings.ContainsFunc(s, unprintable) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unprintable(r) {
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// unprintable reports whether r moves or changes a terminal's output.
func unprintable(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}
