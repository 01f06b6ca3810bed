package registry

import (
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/jsonvalue"
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

// DuplicateKeyError reports an object that repeats a key: the refusal of
// jsonvalue.Parse, whose pointer names the violation (ParseViolation).
type DuplicateKeyError = jsonvalue.DuplicateKeyError

// CheckArgs is the one argument check, run at admission (internal/dispatch)
// and again by the worker, so that a call published around the dispatcher
// does not reach a tool unchecked: the size and nesting limits (the
// spec's, else l's), the count of members and elements (l.MaxValues), then
// the one JSON reader (jsonvalue.Parse) and ent's input schema. It returns
// the VALIDATION error to refuse the call with (a pre-execution error: not
// retryable, no side effects), or nil. A broken limit is one violation at
// the root; a text the reader refuses one violation (ParseViolation);
// schema violations name their fields, at most MaxViolations of them.
func CheckArgs(ent *Entry, args []byte, l ArgLimits) *toolwirev1.ToolError {
	if te := checkLimits(ent, args, l); te != nil {
		return te
	}
	return invalidArgs(ValidateArgs(ent.Input, args))
}

// CheckedArgs is CheckArgs that also returns the parsed arguments when
// they pass, so that the steps after it (the policy: policy.ArgsFrom) read
// them without parsing them again; nil with the refusal otherwise.
func CheckedArgs(ent *Entry, args []byte, l ArgLimits) (*jsonvalue.Doc, *toolwirev1.ToolError) {
	if te := checkLimits(ent, args, l); te != nil {
		return nil, te
	}
	doc, err := jsonvalue.Parse(args)
	if err != nil {
		return nil, invalidArgs([]*toolwirev1.FieldViolation{ParseViolation(err)})
	}
	if te := invalidArgs(validateDoc(ent.Input, doc)); te != nil {
		return nil, te
	}
	return doc, nil
}

// CheckArgsParsed is CheckArgs of arguments parsed already (doc): the
// limits are checked on doc.Raw(), the schema on doc's schema form. Its
// answer is CheckArgs' of doc.Raw().
func CheckArgsParsed(ent *Entry, doc *jsonvalue.Doc, l ArgLimits) *toolwirev1.ToolError {
	if te := checkLimits(ent, doc.Raw(), l); te != nil {
		return te
	}
	return invalidArgs(validateDoc(ent.Input, doc))
}

// checkLimits applies the size and nesting limits (the spec's, else l's)
// and the count of members and elements (l.MaxValues) to the text, before
// any decoder sees it.
func checkLimits(ent *Entry, args []byte, l ArgLimits) *toolwirev1.ToolError {
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
	return nil
}

// invalidArgs is the VALIDATION refusal listing vs (at most
// MaxViolations of them), nil for none.
func invalidArgs(vs []*toolwirev1.FieldViolation) *toolwirev1.ToolError {
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

// CheckParsedAgainst checks arguments parsed already (doc) against
// another schema than the tool's: a schema variant a model family was
// offered (policy toolsets). nil, or the VALIDATION refusal naming the
// fields as CheckArgs does.
func CheckParsedAgainst(sch *jsonschema.Schema, doc *jsonvalue.Doc) *toolwirev1.ToolError {
	return invalidArgs(validateDoc(sch, doc))
}
