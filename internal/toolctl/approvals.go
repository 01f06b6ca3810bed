package toolctl

import (
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

func (a *app) approvalsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List, show, approve and deny the calls waiting for approval",
		Long: `A call the policy asks about (an ask rule, a tool that requires approval,
or an ask default) is parked, not run, until an approver decides. These
commands need credentials with the "approve" scope and see the calls of
your tenant.`,
	}
	cmd.AddCommand(a.approvalsListCommand(), a.approvalsShowCommand(), a.approvalsApproveCommand(), a.approvalsDenyCommand())
	return cmd
}

func (a *app) approvalsListCommand() *cobra.Command {
	var f client.ApprovalFilter
	var state string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List approvals, newest first",
		Long: `List the approvals of your tenant, newest first: a table with -o text, the
approvals as JSON with -o json. --state pending lists what waits for a
decision.`,
		Example: `  toolctl approvals list --state pending
  toolctl approvals list --tool 'fs_*' --session s-42`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if state != "" {
				v, ok := toolwirev1.ApprovalState_value["APPROVAL_STATE_"+strings.ToUpper(state)]
				if !ok || v == 0 {
					return fmt.Errorf("--state %q: want pending, approved, denied or expired", state)
				}
				f.State = toolwirev1.ApprovalState(v)
			}
			list, truncated, err := a.client.ListApprovals(cmd.Context(), f)
			if err != nil {
				return &requestError{err}
			}
			if a.json() {
				return a.printProto(&toolwirev1.ListApprovalsResponse{Approvals: list, Truncated: truncated})
			}
			tw := tabwriter.NewWriter(a.io.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tTOOL\tAGENT\tSESSION\tCREATED\tREASON")
			for _, ap := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ap.GetId(), client.ApprovalStateName(ap.GetState()), ap.GetTool(),
					ap.GetCaller().GetAgent(), ap.GetCaller().GetSession(), stamp(ap.GetCreatedAt().AsTime()),
					firstLine(approvalReason(ap)))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if truncated {
				fmt.Fprintf(a.io.Stderr, "note: more approvals matched; narrow the filters or raise --limit (at most 1000)\n")
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&state, "state", "", "only approvals in this state: pending, approved, denied or expired")
	fs.StringVar(&f.Tool, "tool", "", "only calls of tools matching this glob")
	fs.StringVar(&f.Agent, "agent", "", "only calls of this agent")
	fs.StringVar(&f.Session, "session", "", "only calls of this session")
	fs.IntVar(&f.Limit, "limit", 100, "most approvals listed (at most 1000)")
	return cmd
}

// approvalReason is what a row says about an approval: the decider's
// reason, else why it was asked.
func approvalReason(ap *toolwirev1.Approval) string {
	if ap.GetReason() != "" {
		return ap.GetReason()
	}
	return ap.GetDecision().GetReason()
}

func stamp(t time.Time) string { return t.Local().Format("2006-01-02T15:04:05Z07:00") }

func (a *app) approvalsShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show one approval: the call, why it was asked, what became of it",
		Long: `Show one approval: the tool and version, the caller, the arguments (the
tool's secret fields redacted), why the policy asked, and who decided what.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ap, err := a.client.GetApproval(cmd.Context(), args[0])
			if err != nil {
				return &requestError{err}
			}
			if a.json() {
				return a.printProto(ap)
			}
			a.printApproval(ap)
			return nil
		},
	}
}

func (a *app) printApproval(ap *toolwirev1.Approval) {
	var b strings.Builder
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(&b, "%-12s %s\n", name+":", value)
		}
	}
	c := ap.GetCaller()
	field("approval", ap.GetId())
	field("state", client.ApprovalStateName(ap.GetState()))
	field("tool", ap.GetTool()+" "+short(ap.GetSpecVersion()))
	field("caller", strings.TrimSpace(fmt.Sprintf("tenant=%s agent=%s session=%s user=%s run=%s", c.GetTenant(), c.GetAgent(),
		c.GetSession(), c.GetUser(), c.GetRun())))
	field("arguments", ap.GetArgumentsJson())
	field("asked", ap.GetDecision().GetReason())
	if d := ap.GetDecision(); d.GetRuleId() != "" || d.GetVersion() != "" {
		field("policy", strings.TrimSpace(d.GetRuleId()+" "+d.GetVersion()))
	}
	field("created", stamp(ap.GetCreatedAt().AsTime()))
	if ap.GetState() == toolwirev1.ApprovalState_APPROVAL_STATE_PENDING {
		field("expires", stamp(ap.GetExpiresAt().AsTime()))
	}
	if ap.GetDecidedAt() != nil {
		field("decided", stamp(ap.GetDecidedAt().AsTime()))
		field("by", ap.GetApprover())
		if s := ap.GetScope(); s != toolwirev1.ApprovalScope_APPROVAL_SCOPE_UNSPECIFIED {
			field("scope", strings.ToLower(strings.TrimPrefix(s.String(), "APPROVAL_SCOPE_")))
		}
		field("reason", ap.GetReason())
		field("grant", ap.GetGrantId())
	}
	fmt.Fprint(a.io.Stdout, b.String())
	if ap.GetState() == toolwirev1.ApprovalState_APPROVAL_STATE_PENDING {
		fmt.Fprintf(a.io.Stderr, "approve: toolctl approvals approve %s\ndeny:    toolctl approvals deny %s --reason '...'\n", ap.GetId(), ap.GetId())
	}
}

// scopes are the values of approve --for.
var scopes = map[string]toolwirev1.ApprovalScope{
	"once":    toolwirev1.ApprovalScope_APPROVAL_SCOPE_ONCE,
	"session": toolwirev1.ApprovalScope_APPROVAL_SCOPE_SESSION,
	"agent":   toolwirev1.ApprovalScope_APPROVAL_SCOPE_AGENT,
	"tenant":  toolwirev1.ApprovalScope_APPROVAL_SCOPE_TENANT,
}

func (a *app) approvalsApproveCommand() *cobra.Command {
	var scope, reason, toolGlob string
	var patterns []string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "approve ID",
		Short: "Approve a parked call, once or as a grant",
		Long: `Approve the parked call ID: it runs, and its caller gets its result (fetch it
with 'toolctl get ID'). With --for session, agent or tenant the approval is
also a grant: later calls of the call's session (or agent, or your whole
tenant) that match it — the call's tool, or --tool; --args-pattern globs on
argument fields, every value must match — run without asking, until --ttl
passes or the grant is revoked ('toolctl grants revoke'). A grant never
overrides a deny.`,
		Example: `  toolctl approvals approve 01J9Z3...
  toolctl approvals approve 01J9Z3... --for session --args-pattern path='/tmp/**' --ttl 2h --reason 'scratch files'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, ok := scopes[scope]
			if !ok {
				return fmt.Errorf("--for %q: want once, session, agent or tenant", scope)
			}
			opts := []client.ApproveOption{client.ApproveFor(s), client.WithReason(reason)}
			for _, p := range patterns {
				field, glob, ok := strings.Cut(p, "=")
				if !ok || field == "" {
					return fmt.Errorf("--args-pattern %q: want field=glob", p)
				}
				opts = append(opts, client.WithArgsPattern(field, glob))
			}
			if ttl != 0 {
				opts = append(opts, client.WithGrantTTL(ttl))
			}
			if toolGlob != "" {
				opts = append(opts, client.WithGrantTool(toolGlob))
			}
			ap, g, err := a.client.Approve(cmd.Context(), args[0], opts...)
			if err != nil {
				return &requestError{err}
			}
			if a.json() {
				return a.printProto(&toolwirev1.ApproveResponse{Approval: ap, Grant: g})
			}
			fmt.Fprintf(a.io.Stdout, "approved %s: the call runs; its result: toolctl get %s --wait 1m\n", ap.GetId(), ap.GetId())
			if g != nil {
				fmt.Fprintf(a.io.Stdout, "grant %s: %s\n", g.GetId(), grantLine(g))
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&scope, "for", "once", "once, or a grant for the call's session, agent or tenant")
	fs.StringArrayVar(&patterns, "args-pattern", nil, "grant only: field=glob the later calls' arguments must match (repeatable)")
	fs.DurationVar(&ttl, "ttl", 0, "grant only: how long it lasts (default: the dispatcher's, 24h)")
	fs.StringVar(&toolGlob, "tool", "", "grant only: glob of the tools it covers (default: the call's tool)")
	fs.StringVar(&reason, "reason", "", "why, for the audit")
	return cmd
}

func (a *app) approvalsDenyCommand() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "deny ID --reason TEXT",
		Short: "Deny a parked call; its caller gets PERMISSION_DENIED with the reason",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ap, err := a.client.Deny(cmd.Context(), args[0], reason)
			if err != nil {
				return &requestError{err}
			}
			if a.json() {
				return a.printProto(ap)
			}
			fmt.Fprintf(a.io.Stdout, "denied %s\n", ap.GetId())
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "told to the caller (required)")
	_ = cmd.MarkFlagRequired("reason")
	return cmd
}

func (a *app) grantsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "grants",
		Short: "List and revoke the grants approvers made",
		Long: `A grant is an approval for later calls ('toolctl approvals approve --for
session|agent|tenant'). These commands need the "approve" scope.`,
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the grants in force, newest first",
		Args:  cobra.NoArgs,
	}
	var agent, session string
	list.Flags().StringVar(&agent, "agent", "", "only grants for this agent")
	list.Flags().StringVar(&session, "session", "", "only grants for this session")
	list.RunE = func(cmd *cobra.Command, _ []string) error {
		gs, err := a.client.ListGrants(cmd.Context(), agent, session)
		if err != nil {
			return &requestError{err}
		}
		if a.json() {
			return a.printProto(&toolwirev1.ListGrantsResponse{Grants: gs})
		}
		tw := tabwriter.NewWriter(a.io.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tCOVERS\tEXPIRES\tBY")
		for _, g := range gs {
			exp := "never"
			if g.GetExpiresAt() != nil {
				exp = stamp(g.GetExpiresAt().AsTime())
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", g.GetId(), grantLine(g), exp, g.GetApprover())
		}
		return tw.Flush()
	}
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a grant: later calls it covered ask again",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ok, err := a.client.RevokeGrant(cmd.Context(), args[0])
			if err != nil {
				return &requestError{err}
			}
			if a.json() {
				return a.printProto(&toolwirev1.RevokeGrantResponse{Revoked: ok})
			}
			if !ok {
				fmt.Fprintf(a.io.Stderr, "error: NOT_FOUND: no grant %q\n", args[0])
				return exitCode(ExitToolError)
			}
			fmt.Fprintf(a.io.Stdout, "revoked %s\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(list, revoke)
	return cmd
}

// grantLine says what a grant covers: "tool fs_* for session s1 (agent
// bot) where path=/tmp/**".
func grantLine(g *toolwirev1.Grant) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tool %s for %s", g.GetTool(), g.GetLayer())
	switch g.GetLayer() {
	case "session":
		fmt.Fprintf(&b, " %s", g.GetSession())
		if g.GetAgent() != "" {
			fmt.Fprintf(&b, " (agent %s)", g.GetAgent())
		}
	case "agent":
		fmt.Fprintf(&b, " %s", g.GetAgent())
	}
	if len(g.GetArgs()) > 0 {
		var ps []string
		for _, k := range slices.Sorted(maps.Keys(g.GetArgs())) {
			ps = append(ps, k+"="+g.GetArgs()[k])
		}
		b.WriteString(" where " + strings.Join(ps, " "))
	}
	return b.String()
}
