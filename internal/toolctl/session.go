package toolctl

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/pkg/client"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func (a *app) sessionCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "List, show, end sessions, set their mode, apply intents with the reference applier",
	}
	cmd.AddCommand(a.sessionListCommand(), a.sessionShowCommand(), a.sessionEndCommand(), a.sessionApplyCommand(), a.sessionModeCommand(), a.sessionRepinCommand())
	return cmd
}

// maxSessionsListed bounds toolctl session list --limit.
const maxSessionsListed = 100000

func (a *app) sessionListCommand() *cobra.Command {
	var state, mode string
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List your tenant's sessions, least recently updated first",
		Long: `List the sessions of your tenant, in the order of their last update (the
least recent first): a table of session, state, mode, revision and update
time with -o text, the sessions as JSON with -o json. A session's log and
state values are not listed: session show reads them. Under agent
visibility "own" this needs the admin or approve scope.`,
		Example: `  toolctl session list --state active
  toolctl session list --mode voice --limit 20`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var p client.SessionPage
			switch state {
			case "":
			case "active":
				p.State = toolwirev1.SessionStateFilter_SESSION_STATE_FILTER_ACTIVE
			case "ended":
				p.State = toolwirev1.SessionStateFilter_SESSION_STATE_FILTER_ENDED
			default:
				return fmt.Errorf("--state %q: want active or ended", state)
			}
			if limit < 1 || limit > maxSessionsListed {
				return fmt.Errorf("--limit %d: want 1 to %d", limit, maxSessionsListed)
			}
			p.Mode = mode
			list, more, err := a.listSessions(cmd, p, limit)
			if err != nil {
				return &requestError{err}
			}
			return a.printSessions(list, more)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&state, "state", "", "only sessions in this state: active or ended")
	fs.StringVar(&mode, "mode", "", "only sessions in this mode")
	fs.IntVar(&limit, "limit", 100, fmt.Sprintf("most sessions listed (at most %d)", maxSessionsListed))
	return cmd
}

// listSessions pages through the sessions p selects until limit are
// listed; more says that sessions remain.
func (a *app) listSessions(cmd *cobra.Command, p client.SessionPage, limit int) ([]*toolwirev1.Session, bool, error) {
	var list []*toolwirev1.Session
	for {
		p.Size = min(limit-len(list), 500)
		page, next, err := a.client.ListSessions(cmd.Context(), p)
		if err != nil {
			return nil, false, err
		}
		list = append(list, page...)
		if next == "" {
			return list, false, nil
		}
		if len(list) >= limit {
			return list, true, nil
		}
		p.Token = next
	}
}

func (a *app) printSessions(list []*toolwirev1.Session, more bool) error {
	if a.json() {
		return a.printProto(&toolwirev1.ListSessionsResponse{Sessions: list})
	}
	tw := tabwriter.NewWriter(a.io.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tSTATE\tMODE\tREVISION\tUPDATED\tEND REASON")
	for _, s := range list {
		st := "active"
		if s.GetEnded() {
			st = "ended"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", s.GetSession(), st, cmp.Or(s.GetMode(), "-"), s.GetRevision(),
			stamp(s.GetUpdatedAt().AsTime()), firstLine(s.GetEndReason()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more {
		fmt.Fprintf(a.io.Stderr, "note: more sessions matched; narrow the filters or raise --limit\n")
	}
	return nil
}

func (a *app) sessionEndCommand() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "end SESSION",
		Short: "End a session: its later calls are refused SESSION_INACTIVE",
		Long: `End a session of your tenant: an END_SESSION intent applied by the
reference applier, recorded in the session's log. Every later call naming
the session is refused SESSION_INACTIVE. Ending an ended session changes
nothing (the first reason stands). Needs the admin scope.`,
		Example: `  toolctl session end session-42 --reason "the caller hung up"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.client.EndSession(cmd.Context(), args[0], reason)
			if err != nil {
				return &requestError{err}
			}
			if a.json() {
				return a.printProto(s)
			}
			fmt.Fprintf(a.io.Stdout, "session %s: ended (%s; revision %d)\n", s.GetSession(), cmp.Or(s.GetEndReason(), "no reason"), s.GetRevision())
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why the session ends (at most 1,000 bytes)")
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

func (a *app) sessionModeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "mode SESSION MODE",
		Short: "Set a session's mode (a mode the policy declares; \"\" clears it)",
		Long: `Set the mode of a session of your tenant: a SET_MODE intent applied by the
reference applier. The mode must be one the policy in force declares
(modes:); its layer then applies to the session's calls, and the tools it
forbids outright leave the session's tool lists. Needs the admin scope.`,
		Example: `  toolctl session mode session-42 voice
  toolctl session mode session-42 ""`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.client.SetSessionMode(cmd.Context(), args[0], args[1])
			if err != nil {
				return &requestError{err}
			}
			if a.json() {
				return a.printProto(s)
			}
			mode := cmp.Or(s.GetMode(), "(none)")
			fmt.Fprintf(a.io.Stdout, "session %s: mode %s (revision %d)\n", s.GetSession(), mode, s.GetRevision())
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
	if s.GetMode() != "" {
		fmt.Fprintf(w, "mode:         %s\n", s.GetMode())
	}
	if s.GetEnded() {
		fmt.Fprintf(w, "ended:        %s\n", s.GetEndReason())
	}
	printPins(w, s.GetPinnedVersions())
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
