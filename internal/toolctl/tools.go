package toolctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/toolwire/toolwire/pkg/client"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// formats are the values of --format, in the order help lists them.
var formats = []struct {
	name   string
	format toolwirev1.ToolFormat
}{
	{"native", toolwirev1.ToolFormat_TOOL_FORMAT_NATIVE},
	{"openai", toolwirev1.ToolFormat_TOOL_FORMAT_OPENAI},
	{"anthropic", toolwirev1.ToolFormat_TOOL_FORMAT_ANTHROPIC},
	{"gemini", toolwirev1.ToolFormat_TOOL_FORMAT_GEMINI},
	{"mcp", toolwirev1.ToolFormat_TOOL_FORMAT_MCP},
}

func parseFormat(s string) (toolwirev1.ToolFormat, error) {
	names := make([]string, len(formats))
	for i, f := range formats {
		if f.name == s {
			return f.format, nil
		}
		names[i] = f.name
	}
	return 0, fmt.Errorf("--format %q: want one of %s", s, strings.Join(names, ", "))
}

func isNative(f toolwirev1.ToolFormat) bool {
	return f == toolwirev1.ToolFormat_TOOL_FORMAT_NATIVE
}

func (a *app) toolsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "List and show the tools of the registry",
	}
	cmd.AddCommand(a.toolsListCommand(), a.toolsShowCommand(), a.toolsApproveCommand())
	return cmd
}

const formatHelp = "native, or a provider's format: openai, anthropic, gemini, mcp (printed as that provider's JSON)"

func (a *app) toolsListCommand() *cobra.Command {
	var format, glob, executor, session, category, model string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the tools your credentials may use",
		Long: `List the tools your credentials may use: a table with -o text, the specs
as JSON with -o json, or with --format a provider's tool definitions (JSON,
whatever -o says), ready to paste into that provider's API. With --session,
the tools of that session: those its mode forbids outright are left out.
With --model, what that model is offered (its family's toolset).`,
		Example: `  toolctl tools list
  toolctl tools list --format openai --name 'mcp__github__*'
  toolctl tools list --category retrieval
  toolctl tools list --format anthropic --session s-42`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := parseFormat(format)
			if err != nil {
				return err
			}
			var opts []client.ListOption
			if glob != "" {
				opts = append(opts, client.WithNameGlob(glob))
			}
			if session != "" {
				opts = append(opts, client.InSession(session))
			}
			if model != "" {
				opts = append(opts, client.ForModel(model))
			}
			if executor != "" {
				t, ok := toolwirev1.ExecutorType_value["EXECUTOR_TYPE_"+strings.ToUpper(executor)]
				if !ok || t == 0 {
					return fmt.Errorf("--executor %q: want native, mcp, sandbox or http", executor)
				}
				opts = append(opts, client.WithExecutor(toolwirev1.ExecutorType(t)))
			}
			if category != "" {
				c, ok := toolwirev1.ToolCategory_value["TOOL_CATEGORY_"+strings.ToUpper(category)]
				if !ok || c == 0 {
					return fmt.Errorf("--category %q: want retrieval, action or utility", category)
				}
				opts = append(opts, client.WithCategory(toolwirev1.ToolCategory(c)))
			}
			if !isNative(f) {
				doc, err := a.client.ExportTools(cmd.Context(), f, opts...)
				if err != nil {
					return &requestError{err}
				}
				return a.printJSON(doc)
			}
			specs, err := a.client.ListTools(cmd.Context(), opts...)
			if err != nil {
				return &requestError{err}
			}
			if a.json() {
				return a.printProto(&toolwirev1.ListToolsResponse{Tools: specs})
			}
			return a.printToolTable(specs)
		},
	}
	cmd.Flags().StringVar(&format, "format", "native", formatHelp)
	cmd.Flags().StringVar(&glob, "name", "", "only tools whose names match this glob")
	cmd.Flags().StringVar(&executor, "executor", "", "only tools of this executor type: native, mcp, sandbox or http")
	cmd.Flags().StringVar(&category, "category", "", "only tools of this category: retrieval, action or utility")
	cmd.Flags().StringVar(&session, "session", "", "the tools of this session (less those its mode forbids)")
	cmd.Flags().StringVar(&model, "model", "", "the tools this model is offered (its family's toolset: docs/toolsets.md)")
	return cmd
}

func (a *app) printToolTable(specs []*toolwirev1.ToolSpec) error {
	specs = slices.Clone(specs)
	slices.SortFunc(specs, func(x, y *toolwirev1.ToolSpec) int { return strings.Compare(x.GetName(), y.GetName()) })
	tw := tabwriter.NewWriter(a.io.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tEXECUTOR\tVERSION\tSUMMARY")
	for _, s := range specs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.GetName(), executorName(s.GetExecutor()), short(s.GetVersion()), firstLine(s.GetSummary()))
	}
	return tw.Flush()
}

func (a *app) toolsShowCommand() *cobra.Command {
	var format, model string
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Show one tool's spec",
		Long: `Show the current spec of one tool: readable with -o text, as JSON with
-o json, or with --format as a provider's tool definition (JSON). With
--model, the tool as that model is offered it (its family's toolset: the
variant's schema; not found when the toolset hides or substitutes it).`,
		Example: `  toolctl tools show edit
  toolctl tools show apply_patch --model gpt-5.1 --format openai`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := parseFormat(format)
			if err != nil {
				return err
			}
			var opts []client.GetOption
			if model != "" {
				opts = append(opts, client.GetForModel(model))
			}
			if !isNative(f) {
				doc, err := a.client.ExportTool(cmd.Context(), args[0], f, opts...)
				if err != nil {
					return a.toolErr(args[0], err)
				}
				return a.printJSON(doc)
			}
			spec, err := a.client.GetTool(cmd.Context(), args[0], opts...)
			if err != nil {
				return a.toolErr(args[0], err)
			}
			if a.json() {
				return a.printProto(spec)
			}
			return a.printSpec(spec)
		},
	}
	cmd.Flags().StringVar(&format, "format", "native", formatHelp)
	cmd.Flags().StringVar(&model, "model", "", "the tool as this model is offered it (its family's toolset: docs/toolsets.md)")
	return cmd
}

func (a *app) toolsApproveCommand() *cobra.Command {
	var hash string
	cmd := &cobra.Command{
		Use:   "approve NAME --hash HASH",
		Short: "Re-enable a tool whose definition changed, approving the new definition",
		Long: `A tool imported from an MCP server is disabled when the server changes its
definition after registration, so a server cannot swap a tool under the
agents. Review the new definition with 'toolctl tools show NAME', then
approve exactly that definition by its hash (shown as "definition" there).
Needs credentials with the "admin" and "installation" scopes together (a
definition serves every tenant).`,
		Example: `  toolctl tools show mcp__github__create_issue
  toolctl tools approve mcp__github__create_issue --hash 3f2a...`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := a.client.ApproveTool(cmd.Context(), args[0], hash)
			if err != nil {
				switch connect.CodeOf(err) {
				case connect.CodeNotFound:
					return a.toolErr(args[0], err)
				case connect.CodeFailedPrecondition, connect.CodePermissionDenied:
					fmt.Fprintf(a.io.Stderr, "error: %v\n", err)
					return exitCode(ExitToolError)
				}
				return &requestError{err}
			}
			if a.json() {
				return a.printProto(spec)
			}
			fmt.Fprintf(a.io.Stdout, "approved %s definition %s; its worker re-enables it\n", args[0], hash)
			return nil
		},
	}
	cmd.Flags().StringVar(&hash, "hash", "", "the definition hash being approved, as 'toolctl tools show' prints it (required)")
	_ = cmd.MarkFlagRequired("hash")
	return cmd
}

// toolErr reports an unknown tool like a NOT_FOUND answer (exit 1); other
// errors got no answer.
func (a *app) toolErr(name string, err error) error {
	if connect.CodeOf(err) == connect.CodeNotFound {
		fmt.Fprintf(a.io.Stderr, "error: NOT_FOUND: unknown tool %q\n", name)
		return exitCode(ExitToolError)
	}
	return &requestError{err}
}

func (a *app) printSpec(s *toolwirev1.ToolSpec) error {
	var b strings.Builder
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(&b, "%-13s %s\n", name+":", value)
		}
	}
	field("name", s.GetName())
	field("title", s.GetTitle())
	field("version", s.GetVersion())
	field("executor", executorName(s.GetExecutor()))
	field("provider", s.GetProvider())
	field("category", strings.ToLower(strings.TrimPrefix(s.GetCategory().String(), "TOOL_CATEGORY_")))
	field("annotations", annotations(s.GetAnnotations()))
	field("scopes", strings.Join(s.GetScopes(), ", "))
	field("intents", strings.Join(s.GetIntents(), ", "))
	if s.GetRequiresApproval() {
		field("approval", "required")
	}
	field("definition", s.GetMcp().GetDefinitionHash())
	if s.GetDisabled() {
		field("disabled", s.GetDisabledReason())
	}
	for _, p := range []struct{ name, text string }{
		{"summary", s.GetSummary()}, {"description", s.GetDescription()},
		{"input schema", indentJSON(s.GetInputSchemaJson())}, {"output schema", indentJSON(s.GetOutputSchemaJson())},
	} {
		if p.text != "" {
			fmt.Fprintf(&b, "%s:\n  %s\n", p.name, strings.ReplaceAll(strings.TrimSpace(p.text), "\n", "\n  "))
		}
	}
	_, err := fmt.Fprint(a.io.Stdout, b.String())
	return err
}

func annotations(an *toolwirev1.ToolAnnotations) string {
	if an == nil {
		return ""
	}
	var out []string
	for _, f := range []struct {
		name string
		v    *bool
	}{{"read-only", an.ReadOnly}, {"destructive", an.Destructive}, {"idempotent", an.Idempotent}, {"open-world", an.OpenWorld}} {
		if f.v != nil {
			if *f.v {
				out = append(out, f.name)
			} else {
				out = append(out, "not "+f.name)
			}
		}
	}
	return strings.Join(out, ", ")
}

func indentJSON(s string) string {
	if s == "" {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(s), "", "  "); err != nil {
		return s
	}
	return buf.String()
}

func executorName(t toolwirev1.ExecutorType) string {
	return strings.ToLower(strings.TrimPrefix(t.String(), "EXECUTOR_TYPE_"))
}

// short abbreviates a content-hash version for a table.
func short(v string) string {
	if len(v) > 12 {
		return v[:12]
	}
	return v
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
