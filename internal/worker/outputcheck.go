package worker

import (
	"fmt"
	"strings"

	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// maxOutputViolations is how many violations an answer names and
// carries (ToolError.violations); the rest are counted. maxViolationBytes
// cuts each one's message: an output of many bad items would otherwise
// make an error larger than the result could be published with.
const (
	maxOutputViolations = 5
	maxViolationBytes   = 200
)

// checkOutput checks a result's structured output against the tool's
// output schema (ToolSpec.output_schema_json) for the executors whose
// output is text the tool printed or a server sent (sandbox, HTTP, MCP):
// nil when it matches, when the tool declares no schema or the result
// has no structured output, or when the spec makes the check advisory
// (output_schema_advisory: a WARN log naming the paths, and the
// violation counted); else the PERMANENT error naming the paths and what
// the schema wanted there. The tool ran, so its side effects are
// possible. The error goes where the output would have gone (a schema's
// message may quote a value: "'x' does not match pattern"), with the
// call's secrets redacted; the log names only the paths.
func (d *delivery) checkOutput(res *tool.Result) *toolwirev1.ToolError {
	schema := d.spec.GetOutputSchemaJson()
	if schema == "" || len(res.Structured) == 0 || d.spec.Executor == toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE {
		// A native tool's output is encoded from the Go type its schema
		// is derived from (pkg/tool), so the check could find only where
		// the two disagree — a nil map is null where the schema says
		// object, a type with its own MarshalJSON — and would fail tools
		// that are correct.
		return nil
	}
	sch, err := registry.DefaultSchemas.Compile(schema)
	if err != nil {
		// The registry refuses a spec whose schema does not compile:
		// nothing to check against.
		d.log().Warn("the tool's output schema does not compile; output not checked", "err", err)
		return nil
	}
	v := registry.ValidateOutput(sch, res.Structured)
	if len(v) == 0 {
		return nil
	}
	advisory := d.spec.GetOutputSchemaAdvisory()
	d.w.metrics.Tool(d.call.Tool, d.spec.Executor).BadOutput(!advisory)
	sec := d.w.secretsOf(d.call)
	total := len(v)
	v = v[:min(total, maxOutputViolations)]
	parts := make([]string, 0, len(v))
	paths := make([]string, 0, len(v))
	for _, f := range v {
		// A path is made of the output's keys: redacted as its values are.
		f.Field = sec.String(cutText(f.Field, maxViolationBytes))
		f.Message = sec.String(cutText(f.Message, maxViolationBytes))
		parts = append(parts, fmt.Sprintf("%s: %s", cmpRoot(f.Field), f.Message))
		paths = append(paths, cmpRoot(f.Field))
	}
	msg := "the tool's structured output does not match its output_schema: " + strings.Join(parts, "; ")
	if more := total - len(parts); more > 0 {
		msg += fmt.Sprintf(" (and %d more)", more)
	}
	if advisory {
		d.log().Warn("structured output does not match the output schema; passed (output_schema_advisory)", "violations", total, "paths", paths)
		return nil
	}
	d.log().Warn("structured output does not match the output schema; answering PERMANENT", "violations", total, "paths", paths)
	return &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_PERMANENT, Message: msg, Violations: v,
		Suggestion:         "the tool's output and its declared output_schema disagree: fix the tool or its schema (or set output_schema_advisory)",
		PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_POSSIBLE}
}

// cutText shortens s to at most n bytes of valid UTF-8, marked "…".
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// cmpRoot names the root of the output "/" rather than "".
func cmpRoot(field string) string {
	if field == "" {
		return "/"
	}
	return field
}
