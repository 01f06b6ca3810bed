package toolctl

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/pkg/client"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func (a *app) policyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Apply, show, diff and explain your tenant's policy (admin scope)",
		Long: `Apply, show, compare and explain the policy document of your tenant: who
may run what (docs/policy.md). The tenant is your credentials'; every
command needs the "admin" scope. A tenant without a document of its own is
under the installation's (the dispatcher's --policy), shown as tenant "*".`,
	}
	cmd.AddCommand(a.policyApplyCommand(), a.policyShowCommand(), a.policyDiffCommand(), a.policyHistoryCommand(),
		a.policyExplainCommand(), a.policyRemoveCommand())
	return cmd
}

// readPolicyDoc reads a policy document from file ("-" = stdin), refusing
// one over policy.MaxDocumentBytes before reading it all.
func readPolicyDoc(stdin io.Reader, file string) ([]byte, error) {
	r := stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, policy.MaxDocumentBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	if len(b) > policy.MaxDocumentBytes {
		return nil, fmt.Errorf("%s: a policy document is at most %d bytes", file, policy.MaxDocumentBytes)
	}
	return b, nil
}

// printRefusal prints a refused document's problems, one a line, and
// returns ExitToolError; other errors are returned as they are.
func (a *app) printRefusal(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) && ce.Code() == connect.CodeResourceExhausted {
		fmt.Fprintf(a.io.Stderr, "error: %v\n", err)
		fmt.Fprintln(a.io.Stderr, "The dispatcher's --max-request-bytes (default 320 KiB) bounds a policy document sent through the API: raise it, or apply the document with the dispatcher's --policy.")
		return exitCode(ExitToolError)
	}
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument {
		return &requestError{err}
	}
	msg := strings.TrimPrefix(ce.Message(), "policystore: ")
	msg = strings.TrimPrefix(msg, "policy: ")
	head, rest, found := strings.Cut(msg, ": line ")
	if !found {
		fmt.Fprintf(a.io.Stderr, "error: the policy was refused: %s\n", msg)
		return exitCode(ExitToolError)
	}
	fmt.Fprintf(a.io.Stderr, "error: the policy was refused: %s:\n", head)
	rest = "line " + rest
	rest = strings.ReplaceAll(rest, "; line ", "\n  line ")
	rest = strings.ReplaceAll(rest, "; and ", "\n  and ")
	fmt.Fprintf(a.io.Stderr, "  %s\n", rest)
	return exitCode(ExitToolError)
}

func (a *app) policyApplyCommand() *cobra.Command {
	var o client.ApplyPolicyOptions
	cmd := &cobra.Command{
		Use:   "apply FILE",
		Short: "Check a policy document and put it in force for your tenant",
		Long: `Check a policy document (YAML; "-" reads stdin) and put it in force for your
tenant on every dispatcher replica. It is refused, with each problem's
line, when it does not parse, a condition does not compile or one of its
own tests fails; nothing changes then. --dry-run only checks. Applying
the document already in force changes nothing.`,
		Example: `  toolctl policy apply policy.yaml --comment "deny writes outside /srv"
  toolctl policy apply policy.yaml --dry-run`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := readPolicyDoc(cmd.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			res, err := a.client.ApplyPolicy(cmd.Context(), doc, o)
			if err != nil {
				return a.printRefusal(err)
			}
			if a.json() {
				return a.printProto(res)
			}
			v := res.GetVersion()
			what := fmt.Sprintf("%s (%d rules, %d tests passed)", v.GetVersion(), v.GetRules(), res.GetTestsPassed())
			switch {
			case o.DryRun && res.GetChanged():
				fmt.Fprintf(a.io.Stdout, "dry run: the document is valid; applying it would put %s in force\n", what)
			case o.DryRun:
				fmt.Fprintf(a.io.Stdout, "dry run: the document is valid; %s is already in force\n", what)
			case res.GetChanged():
				fmt.Fprintf(a.io.Stdout, "applied %s for tenant %s\n", what, v.GetTenant())
			default:
				fmt.Fprintf(a.io.Stdout, "unchanged: %s is already in force\n", what)
			}
			if !o.DryRun && !res.GetInForce() {
				fmt.Fprintln(a.io.Stderr, "warning: the dispatcher that answered does not have it in force yet (see its log); it is stored, and every dispatcher keeps trying to load it")
			}
			if !o.DryRun {
				a.printFleet(res.GetReplicasInForce(), res.GetReplicasNotInForce())
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Comment, "comment", "", "why, recorded in the history")
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "check the document without applying it")
	return cmd
}

func (a *app) policyShowCommand() *cobra.Command {
	var version string
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print the policy document in force (or one version) as applied",
		Long: `Print the policy document in force for your tenant, or --version V, as it
was applied (comments kept) on stdout; which version it is goes to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := a.client.GetPolicy(cmd.Context(), version)
			if err != nil {
				return &requestError{err}
			}
			if a.json() {
				return a.printProto(res)
			}
			if res.GetVersion() == nil {
				fmt.Fprintln(a.io.Stderr, "no policy in force: every call is allowed (but calls of tools that require approval ask)")
				return nil
			}
			fmt.Fprintf(a.io.Stderr, "# %s\n", describeVersion(res.GetVersion()))
			fmt.Fprint(a.io.Stdout, res.GetDocument())
			if d := res.GetDocument(); d != "" && !strings.HasSuffix(d, "\n") {
				fmt.Fprintln(a.io.Stdout)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&version, "version", "", "a version (sha256:...) instead of the one in force")
	return cmd
}

// describeVersion renders a policy version for a header line.
func describeVersion(v *toolwirev1.PolicyVersion) string {
	whose := "tenant " + v.GetTenant()
	if v.GetTenant() == "*" {
		whose = "the installation's document"
	}
	s := fmt.Sprintf("%s, %s", v.GetVersion(), whose)
	if t := v.GetAppliedAt(); t != nil {
		s += ", applied " + t.AsTime().UTC().Format(time.RFC3339)
	}
	if v.GetAppliedBy() != "" {
		s += " by " + v.GetAppliedBy()
	}
	if v.GetComment() != "" {
		s += ": " + v.GetComment()
	}
	return s
}

func (a *app) policyDiffCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "diff FILE",
		Short: "Compare a policy document with the one in force",
		Long: `Print the unified diff (diff -u) from the policy document in force for your
tenant to FILE ("-" reads stdin), then on stderr whether FILE is another
version of the rules or only differs in comments and layout (the version
is the hash of the rules, not of the text). Nothing is applied. It exits 0
whatever the difference.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := readPolicyDoc(cmd.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			cur, err := a.client.GetPolicy(cmd.Context(), "")
			if err != nil {
				return &requestError{err}
			}
			curName, curVersion := "in force: none", ""
			if v := cur.GetVersion(); v != nil {
				curName, curVersion = "in force: "+v.GetVersion(), v.GetVersion()
			}
			fmt.Fprint(a.io.Stdout, policystore.Diff(curName, args[0], []byte(cur.GetDocument()), doc))
			p, perr := policy.Parse(doc)
			switch {
			case perr != nil:
				fmt.Fprintf(a.io.Stderr, "note: %s would be refused: %v\n", args[0], perr)
			case p.Version() == curVersion && string(doc) == cur.GetDocument():
				fmt.Fprintf(a.io.Stderr, "%s is the document in force (%s)\n", args[0], curVersion)
			case p.Version() == curVersion:
				fmt.Fprintf(a.io.Stderr, "same rules (%s): only comments or layout differ\n", curVersion)
			default:
				fmt.Fprintf(a.io.Stderr, "%s is version %s; in force: %s\n", args[0], p.Version(), cmpOr(curVersion, "none"))
			}
			return nil
		},
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (a *app) policyHistoryCommand() *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "history",
		Short: "List the policy documents applied for your tenant, newest first",
		Long: `List the policy documents applied for your tenant, newest first, the one in
force marked (none after a remove, when the installation's or no document
is in force), at most --limit (64 are kept). A tenant without a document
of its own sees the installation's, marked tenant "*".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			vs, err := a.client.ListPolicyVersions(cmd.Context(), limit)
			if err != nil {
				return &requestError{err}
			}
			if a.json() {
				return a.printProto(&toolwirev1.ListPolicyVersionsResponse{Versions: vs})
			}
			if len(vs) == 0 {
				fmt.Fprintln(a.io.Stderr, "no policy has been applied")
				return nil
			}
			// What is in force is asked, not assumed: after a remove the
			// newest of the tenant's own versions is not.
			cur, err := a.client.GetPolicy(cmd.Context(), "")
			if err != nil {
				return &requestError{err}
			}
			inForce := cur.GetVersion()
			tw := tabwriter.NewWriter(a.io.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "VERSION\tTENANT\tAPPLIED\tBY\tRULES\tTESTS\tCOMMENT")
			marked := false
			for _, v := range vs {
				ver := short(strings.TrimPrefix(v.GetVersion(), "sha256:"))
				if !marked && inForce != nil && v.GetVersion() == inForce.GetVersion() && v.GetTenant() == inForce.GetTenant() {
					ver += " (in force)"
					marked = true
				}
				at := ""
				if t := v.GetAppliedAt(); t != nil {
					at = t.AsTime().UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", ver, v.GetTenant(), at, v.GetAppliedBy(), v.GetRules(), v.GetTests(),
					firstLine(v.GetComment()))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "at most this many (at most 64)")
	return cmd
}

func (a *app) policyExplainCommand() *cobra.Command {
	var req toolwirev1.ExplainRequest
	cmd := &cobra.Command{
		Use:   "explain TOOL [JSON]",
		Short: "Say what the policy decides about a call, and why",
		Long: `Decide a call of TOOL with the arguments JSON ("-" reads stdin; none = {})
as admission would, without running it, and say why: the outcome, the
policy version, the applicable layers, every rule that names the tool with
its layer, effect and line, whether it matched and why (argument values
against patterns, a condition's value or error), and the grant or approval
that covered an ask. The call is your tenant's, on behalf of --agent
(default: yours, with your scopes), --session, --user and --run; with
--mode, in a session in that mode (the mode's layer applies; the mode is
not read from --session; without --mode, the policy's sessions.default_mode
if it has one, as admission decides). "sessions:" shows the policy's session
rules and what they do to the call (a call without --session under
sessions.required is refused before the rules decide). It shows rule text
and argument values: it is for administrators.`,
		Example: `  toolctl policy explain fs_write '{"path":"/etc/passwd"}' --agent support-bot --session s-1
  toolctl policy explain export_csv --mode voice
  toolctl policy explain send_email - --agent mailer < args.json`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := readArgs(cmd.InOrStdin(), args[1:])
			if err != nil {
				return err
			}
			req.Tool, req.ArgumentsJson = args[0], string(raw)
			x, err := a.client.Explain(cmd.Context(), &req)
			if err != nil {
				return &requestError{err}
			}
			if a.json() {
				return a.printProto(x)
			}
			a.printExplanation(x)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Agent, "agent", "", "on behalf of this agent of your tenant (default: yours)")
	f.StringVar(&req.Session, "session", "", "the call's session")
	f.StringVar(&req.User, "user", "", "the call's end user")
	f.StringVar(&req.Run, "run", "", "the call's agent run")
	f.StringSliceVar(&req.Scopes, "scopes", nil, "the caller's scopes (default: yours, when --agent is yours)")
	f.StringVar(&req.ApprovalId, "approval", "", "decide as if the call presented this approval")
	f.StringVar(&req.SpecVersion, "spec-version", "", "the tool's spec version (default: current)")
	f.StringVar(&req.PolicyVersion, "policy-version", "", "decide with this policy version instead of the one in force")
	f.StringVar(&req.Mode, "mode", "", "decide as if the session were in this mode (one the policy declares)")
	f.StringVar(&req.Model, "model", "", "decide as if the call were made for this model (caller.model and caller.model_family)")
	return cmd
}

// printExplanation prints an ExplainResponse for a terminal.
func (a *app) printExplanation(x *toolwirev1.ExplainResponse) {
	w := a.io.Stdout
	d := x.GetDecision()
	fmt.Fprintf(w, "outcome:  %s\n", strings.ToLower(strings.TrimPrefix(d.GetOutcome().String(), "POLICY_OUTCOME_")))
	fmt.Fprintf(w, "policy:   %s\n", cmpOr(d.GetVersion(), "none in force"))
	fmt.Fprintf(w, "decided:  %s\n", decidedBy(d))
	if len(x.GetLayers()) > 0 {
		fmt.Fprintf(w, "layers:   %s\n", strings.Join(x.GetLayers(), ", "))
	}
	if s := x.GetSessions(); s != "" {
		fmt.Fprintf(w, "sessions: %s\n", s)
	}
	if rules := x.GetRules(); len(rules) > 0 {
		fmt.Fprintln(w, "rules naming the tool:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  MATCH\tEFFECT\tLAYER\tRULE\tLINE\tWHY")
		for _, r := range rules {
			match := "no"
			if r.GetMatched() {
				match = "yes"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%s\n", match, r.GetEffect(), r.GetLayer(), r.GetId(), r.GetLine(), r.GetNote())
		}
		_ = tw.Flush()
		for _, r := range rules {
			if r.GetReason() != "" {
				fmt.Fprintf(w, "  reason of %s: %s\n", r.GetId(), r.GetReason())
			}
		}
	}
	if n := x.GetOthers(); n > 0 {
		fmt.Fprintf(w, "other rules: %d (they do not name the tool)\n", n)
	}
	if g := x.GetGrant(); g != nil {
		s := fmt.Sprintf("%s (%s layer, tool %q", g.GetId(), g.GetLayer(), g.GetTool())
		if t := g.GetExpiresAt(); t != nil {
			s += ", until " + t.AsTime().UTC().Format(time.RFC3339)
		}
		if g.GetApprover() != "" {
			s += ", by " + g.GetApprover()
		}
		fmt.Fprintf(w, "grant:    %s)\n", s)
	}
	if id := d.GetApprovalId(); id != "" {
		fmt.Fprintf(w, "approval: %s\n", id)
	}
	if e := x.GetApprovalError(); e != "" {
		fmt.Fprintf(w, "approval not used: %s\n", e)
	}
	for _, e := range x.GetErrors() {
		fmt.Fprintf(w, "condition error: %s\n", e)
	}
}

// decidedBy says in one line what decided.
func decidedBy(d *toolwirev1.PolicyDecision) string {
	var s string
	// The reason is what a refused or asked caller is told.
	refused := d.GetOutcome() != toolwirev1.PolicyOutcome_POLICY_OUTCOME_ALLOW && d.GetReason() != ""
	switch {
	case d.GetRuleId() != "":
		s = "rule " + d.GetRuleId()
		if refused && d.GetReason() != d.GetRuleId() {
			s += ": " + d.GetReason()
		}
	case d.GetDefaultLayer() != "":
		s = fmt.Sprintf("the %s layer's default", d.GetDefaultLayer())
		if refused {
			s += ": " + d.GetReason()
		}
	case d.GetRequiresApproval():
		s = "the tool requires approval"
	case d.GetVersion() == "":
		s = "no policy: every call is allowed"
	default:
		s = "no rule and no default: allowed"
	}
	if d.GetRequiresApproval() && d.GetRuleId() != "" {
		s += "; the tool also requires approval"
	}
	if d.GetGrantId() != "" {
		s += "; the ask is covered by grant " + d.GetGrantId()
	}
	if d.GetApprovalId() != "" {
		s += "; the ask is covered by approval " + d.GetApprovalId()
	}
	return s
}

func (a *app) policyRemoveCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "remove",
		Short: "Take your tenant's own document out of force (back to the installation's)",
		Long: `Take your tenant's own policy document out of force: the tenant is under the
installation document (the dispatcher's --policy) again, or under no policy
when there is none. The history stays; apply a document to bring one back.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := a.client.RemovePolicy(cmd.Context())
			if err != nil {
				return a.printRefusal(err)
			}
			if a.json() {
				return a.printProto(res)
			}
			now := "no policy (every call allowed, tools that require approval ask)"
			if v := res.GetInForce(); v != nil {
				now = "the installation document " + v.GetVersion()
			}
			if res.GetRemoved() {
				fmt.Fprintf(a.io.Stdout, "removed; in force now: %s\n", now)
				a.printFleet(res.GetReplicasInForce(), res.GetReplicasNotInForce())
			} else {
				fmt.Fprintf(a.io.Stdout, "your tenant has no document of its own; in force: %s\n", now)
			}
			return nil
		},
	}
}

// printFleet says on how many dispatchers a policy change is in force, and
// names, on stderr, those that answered and do not enforce it.
func (a *app) printFleet(in []string, notIn map[string]string) {
	if len(in) > 0 {
		fmt.Fprintf(a.io.Stdout, "in force on %d dispatcher(s)\n", len(in))
	}
	for _, r := range slices.Sorted(maps.Keys(notIn)) {
		fmt.Fprintf(a.io.Stderr, "warning: not in force on dispatcher %s: %s\n", r, notIn[r])
	}
}
