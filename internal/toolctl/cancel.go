package toolctl

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func (a *app) cancelCommand() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel CALL_ID",
		Short: "Ask a call to stop",
		Long: `Ask a call to stop, through any dispatcher replica. A queued call never
runs; a running call is interrupted. Its result is then CANCELLED, with the
reason.

Prints the outcome: REQUESTED (exit 0; also when an earlier cancel was
already requested), ALREADY_FINISHED (exit 0; the call had its result,
nothing changed) or UNKNOWN_CALL (exit 1). With -o json it prints the
CancelResponse.`,
		Example: `  toolctl cancel 01J... --reason "user gave up"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := a.client.Cancel(cmd.Context(), args[0], reason)
			if err != nil {
				return &requestError{err}
			}
			if a.json() {
				if err := a.printProto(&toolwirev1.CancelResponse{Outcome: out}); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(a.io.Stdout, strings.TrimPrefix(out.String(), "CANCEL_OUTCOME_"))
			}
			if out == toolwirev1.CancelOutcome_CANCEL_OUTCOME_UNKNOWN_CALL {
				if !a.json() {
					fmt.Fprintf(a.io.Stderr, "error: NOT_FOUND: no call %q is known\n", args[0])
				}
				return exitCode(ExitToolError)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why the call is cancelled (recorded in its events and its CANCELLED result)")
	return cmd
}
