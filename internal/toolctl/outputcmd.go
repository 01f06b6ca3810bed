package toolctl

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/toolwire/toolwire/pkg/client"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func (a *app) outputCommand() *cobra.Command {
	var (
		q   client.OutputQuery
		all bool
	)
	cmd := &cobra.Command{
		Use:   "output CALL_ID",
		Short: "Print the whole output of a call, by range or by pattern",
		Long: `Print the output text of a finished call (its text blocks joined by
newlines), all of it also when the inline response was cut to the tool's
output limits: --limit bytes from --offset, or with --grep the lines that
match a regular expression (RE2 syntax), each as NUMBER:TEXT.

When more follows, a note on stderr gives the --offset to read on from;
--all reads on to the end. Exit status as for 'get': 3 when the call is
still running, 1 when it is unknown. With -o json it prints each
GetOutputResponse.`,
		Example: `  toolctl output 01J...                      # the first 64 KiB
  toolctl output 01J... --offset 65536 --limit 1048576
  toolctl output 01J... --grep 'FAIL|panic'   # matching lines, numbered
  toolctl output 01J... --all > out.txt`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if q.Offset < 0 || q.Limit < 0 {
				return fmt.Errorf("--offset and --limit must not be negative")
			}
			for {
				resp, err := a.client.GetOutput(cmd.Context(), args[0], q)
				if err != nil {
					return a.outputError(err)
				}
				if err := a.printOutput(resp); err != nil {
					return err
				}
				if resp.GetEof() || resp.GetNextOffset() <= q.Offset { // the end, or no progress (a limit below one character)
					return nil
				}
				if !all {
					if !a.json() {
						fmt.Fprintf(a.io.Stderr, "note: more output follows (%d of %d bytes read); read on with: toolctl output %s --offset %d\n",
							resp.GetNextOffset(), resp.GetSize(), args[0], resp.GetNextOffset())
					}
					return nil
				}
				q.Offset = resp.GetNextOffset()
			}
		},
	}
	f := cmd.Flags()
	f.Int64Var(&q.Offset, "offset", 0, "byte offset to read from (with --grep: search the lines from there)")
	f.Int64Var(&q.Limit, "limit", 0, "most bytes to print per request (0 = 64 KiB, at most 1 MiB)")
	f.StringVar(&q.Grep, "grep", "", "print only the lines matching this regular expression (RE2 syntax)")
	f.BoolVar(&all, "all", false, "read on to the end of the output")
	return cmd
}

// printOutput prints one page of output.
func (a *app) printOutput(resp *toolwirev1.GetOutputResponse) error {
	if a.json() {
		return a.printProtoLine(resp)
	}
	if len(resp.GetLines()) == 0 {
		_, err := fmt.Fprint(a.io.Stdout, resp.GetText())
		return err
	}
	for _, l := range resp.GetLines() {
		if _, err := fmt.Fprintf(a.io.Stdout, "%d:%s\n", l.GetNumber(), l.GetText()); err != nil {
			return err
		}
	}
	return nil
}

// outputError turns a GetOutput error into toolctl's answer and exit code.
func (a *app) outputError(err error) error {
	var se *client.StateError
	if !errors.As(err, &se) {
		return &requestError{err}
	}
	if a.json() {
		if err := a.printProto(&toolwirev1.GetOutputResponse{CallId: se.CallID, State: se.State}); err != nil {
			return err
		}
	} else if errors.Is(err, client.ErrPending) {
		fmt.Fprintf(a.io.Stderr, "pending: call %s has no result yet; wait for it with: toolctl get %s --wait 1m\n", se.CallID, se.CallID)
	} else {
		fmt.Fprintf(a.io.Stderr, "error: NOT_FOUND: no call %q is known\n", se.CallID)
	}
	if errors.Is(err, client.ErrPending) {
		return exitCode(ExitPending)
	}
	return exitCode(ExitToolError)
}
