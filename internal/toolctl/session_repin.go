package toolctl

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/spf13/cobra"
)

func (a *app) sessionRepinCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "repin SESSION [TOOL]",
		Short: "Clear a session's pinned spec versions (all, or one tool's)",
		Long: `Clear the spec versions a session of your tenant pins (a session pins a
tool's version on its first call of it when pinning is in force: the
call's --pin-versions, or the policy's sessions.pin_versions). The
session's next call of the tool pins the version current then. Needs the
admin scope.`,
		Example: `  toolctl session repin session-42
  toolctl session repin session-42 search_docs`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			tool := ""
			if len(args) == 2 {
				tool = args[1]
			}
			s, err := a.client.ClearSessionPins(cmd.Context(), args[0], tool)
			if err != nil {
				return &requestError{err}
			}
			if a.json() {
				return a.printProto(s)
			}
			fmt.Fprintf(a.io.Stdout, "session %s: %d pin(s) left (revision %d)\n", s.GetSession(), len(s.GetPinnedVersions()), s.GetRevision())
			printPins(a.io.Stdout, s.GetPinnedVersions())
			return nil
		},
	}
}

// printPins prints a session's pinned versions, by tool name.
func printPins(w io.Writer, pins map[string]string) {
	if len(pins) == 0 {
		return
	}
	fmt.Fprintln(w, "pinned:")
	for _, tool := range slices.Sorted(maps.Keys(pins)) {
		fmt.Fprintf(w, "  %s = %s\n", tool, pins[tool])
	}
}
