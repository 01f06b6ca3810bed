package toolctl

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func (a *app) sessionCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Show sessions and apply intents with the reference applier",
	}
	cmd.AddCommand(a.sessionShowCommand(), a.sessionApplyCommand())
	return cmd
}

func (a *app) sessionShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show SESSION",
		Short: "Show the state the reference applier keeps for a session",
		Long: `Show a session of your tenant as the dispatcher's reference applier keeps
it: state values, flags, the pending message and the log of applied
intents. A session nothing was applied to shows revision 0.`,
		Example: `  toolctl session show session-42
  toolctl session show session-42 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.client.GetSession(cmd.Context(), args[0])
			if err != nil {
				return &requestError{err}
			}
			if a.json() {
				return a.printProto(s)
			}
			return a.printSession(s)
		},
	}
}

func (a *app) sessionApplyCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "apply CALL_ID",
		Short: "Apply a finished call's intents to its session (each intent once)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, applied, err := a.client.ApplyIntents(cmd.Context(), args[0])
			if err != nil {
				return &requestError{err}
			}
			if a.json() {
				return a.printProto(s)
			}
			fmt.Fprintf(a.io.Stdout, "applied %d intent(s) to session %s (revision %d)\n", applied, s.GetSession(), s.GetRevision())
			return nil
		},
	}
}

func (a *app) printSession(s *toolwirev1.Session) error {
	w := a.io.Stdout
	fmt.Fprintf(w, "session:      %s\nrevision:     %d\n", s.GetSession(), s.GetRevision())
	if t := s.GetUpdatedAt(); t != nil {
		fmt.Fprintf(w, "updated:      %s\n", t.AsTime().Format(time.RFC3339))
	}
	if s.GetEnded() {
		fmt.Fprintf(w, "ended:        %s\n", s.GetEndReason())
	}
	if s.GetPendingMessage() != "" {
		fmt.Fprintf(w, "pending:      %s\n", s.GetPendingMessage())
	}
	var flags []string
	if s.GetSuppressAudio() {
		flags = append(flags, "suppress-audio")
	}
	if s.GetSuppressTranscript() {
		flags = append(flags, "suppress-transcript")
	}
	if len(flags) > 0 {
		fmt.Fprintf(w, "flags:        %s\n", strings.Join(flags, ", "))
	}
	if len(s.GetStateJson()) > 0 {
		fmt.Fprintln(w, "state:")
		for _, k := range slices.Sorted(maps.Keys(s.GetStateJson())) {
			fmt.Fprintf(w, "  %s = %s\n", k, s.GetStateJson()[k])
		}
	}
	if len(s.GetLog()) > 0 {
		fmt.Fprintln(w, "log:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, l := range s.GetLog() {
			what := l.GetPayloadJson()
			if r := l.GetRefused(); r != "" {
				what = "refused: " + r
			}
			fmt.Fprintf(tw, "  %s\t%s/%s\t%s\t%s\n", l.GetAppliedAt().AsTime().Format(time.RFC3339), l.GetCallId(), l.GetIntentId(), l.GetType(), what)
		}
		return tw.Flush()
	}
	return nil
}
