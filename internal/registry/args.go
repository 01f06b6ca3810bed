package registry

import (
	"fmt"
	"strings"

	"github.com/toolwire/toolwire/internal/envelope"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ArgLimits bound a call's arguments. The tool spec's own limits
// (Limits.max_args_bytes, max_args_depth) win over MaxBytes and MaxDepth.
type ArgLimits struct {
	MaxBytes int64
	MaxDepth int
	// MaxValues bounds the count of members and elements; 0 = not counted.
	MaxValues int
}

// MaxViolations bounds the violations a refusal lists: it is stored as an
// event and answered, and must not grow with the arguments.
const MaxViolations = 20

// CheckArgs is the one argument check, run at admission (internal/dispatch)
// and again by the worker, so that a call published around the dispatcher
// does not reach a tool unchecked: the size and nesting limits (the
// spec's, else l's), the count of members and elements (l.MaxValues), then
// ent's input schema. It returns the VALIDATION error to refuse the call
// with (a pre-execution error: not retryable, no side effects), or nil. A
// broken limit is one violation at the root; schema violations name their
// fields, at most MaxViolations of them.
func CheckArgs(ent *Entry, args []byte, l ArgLimits) *toolwirev1.ToolError {
	maxBytes, maxDepth := l.MaxBytes, l.MaxDepth
	if sl := ent.Spec.GetLimits(); sl != nil {
		if sl.MaxArgsBytes > 0 {
			maxBytes = sl.MaxArgsBytes
		}
		if sl.MaxArgsDepth > 0 {
			maxDepth = int(sl.MaxArgsDepth)
		}
	}
	if int64(len(args)) > maxBytes {
		return Violation("", fmt.Sprintf("arguments are %d bytes, over the limit of %d", len(args), maxBytes))
	}
	maxValues := l.MaxValues
	if maxValues <= 0 {
		maxValues = int(^uint(0) >> 1)
	}
	n, depth := JSONShape(args, maxValues, maxDepth)
	if depth > maxDepth {
		return Violation("", fmt.Sprintf("arguments nest deeper than the limit of %d", maxDepth))
	}
	if n > maxValues {
		return Violation("", fmt.Sprintf("arguments have more than the limit of %d members and elements", maxValues))
	}
	vs := ValidateArgs(ent.Input, args)
	if len(vs) == 0 {
		return nil
	}
	more := len(vs) - MaxViolations
	vs = vs[:min(len(vs), MaxViolations)]
	parts := make([]string, 0, len(vs)+1)
	for _, v := range vs {
		parts = append(parts, FieldName(v.Field)+": "+v.Message)
	}
	if more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", more))
	}
	te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, "invalid arguments: "+strings.Join(parts, "; "))
	te.Violations = vs
	return te
}

// Violation is the VALIDATION refusal of one field (a JSON Pointer; "" is
// the root): a pre-execution error whose message names the field, unless
// it is the root, and which lists it as its one violation.
func Violation(field, msg string) *toolwirev1.ToolError {
	te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, msg)
	if field != "" {
		te.Message = FieldName(field) + ": " + msg
	}
	te.Violations = []*toolwirev1.FieldViolation{{Field: field, Message: msg}}
	return te
}

// FieldName renders a JSON Pointer for messages: "/a/0/b" → "a/0/b",
// "" → "(root)".
func FieldName(ptr string) string {
	if ptr == "" {
		return "(root)"
	}
	return strings.TrimPrefix(ptr, "/")
}
