package toolctl

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolwire/toolwire/pkg/client"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func (a *app) usageCommand() *cobra.Command {
	var o client.UsageOptions
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Show the limits in force for you: rates, calls running, budgets used and when they reset",
		Long: `Show the limits of the policy in force for your tenant (docs/policy.md, "Limits
and budgets"), as they stand for your agent, or with --agent, --session,
--user or --run for that key (another agent needs the "admin" scope). Limits
keyed by tool or by a CEL expression depend on each call and show no use.`,
		Example: `  toolctl usage
  toolctl usage --session s-42
  toolctl usage --agent support-bot -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := a.client.GetUsage(cmd.Context(), o)
			if err != nil {
				return a.printRefusal(err)
			}
			if a.json() {
				return a.printProto(res)
			}
			if len(res.GetLimits()) == 0 {
				fmt.Fprintln(a.io.Stdout, "no limits in force")
				return nil
			}
			tw := tabwriter.NewWriter(a.io.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "LIMIT\tKEY\tRATE\tRUNNING\tBUDGET USED\tREMAINING\tRESETS")
			for _, l := range res.GetLimits() {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.GetLimit(), usageKey(l), usageRate(l), usageRunning(l),
					usageBudget(l), usageRemaining(l), usageReset(l))
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Agent, "agent", "", "another agent of your tenant (admin scope)")
	f.StringVar(&o.Session, "session", "", "the session of session-keyed limits")
	f.StringVar(&o.User, "user", "", "the user of user-keyed limits")
	f.StringVar(&o.Run, "run", "", "the run of run-keyed limits")
	return cmd
}

func usageKey(l *toolwirev1.LimitUsage) string {
	switch {
	case l.GetValue() != "":
		return l.GetKey() + "=" + l.GetValue()
	case strings.ContainsAny(l.GetKey(), " .()\"'+"):
		return "(per call)"
	}
	return l.GetKey()
}

func usageRate(l *toolwirev1.LimitUsage) string {
	if l.GetRateCount() == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%s burst %d", l.GetRateCount(), l.GetRatePer().AsDuration(), l.GetRateBurst())
}

func usageRunning(l *toolwirev1.LimitUsage) string {
	if l.GetConcurrency() == 0 {
		return "-"
	}
	return fmt.Sprintf("%d of %d", l.GetInFlight(), l.GetConcurrency())
}

func usageBudget(l *toolwirev1.LimitUsage) string {
	if l.GetBudgetUnits() == 0 {
		return "-"
	}
	return fmt.Sprintf("%d of %d per %s", l.GetUsed(), l.GetBudgetUnits(), l.GetBudgetWindow().AsDuration())
}

func usageRemaining(l *toolwirev1.LimitUsage) string {
	if l.GetBudgetUnits() == 0 {
		return "-"
	}
	return fmt.Sprint(l.GetRemaining())
}

func usageReset(l *toolwirev1.LimitUsage) string {
	if l.GetResetAt() == nil {
		return "-"
	}
	return l.GetResetAt().AsTime().UTC().Format(time.RFC3339)
}
