package tool

import (
	"encoding/json"
	"reflect"
	"slices"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ContentProvider is implemented by output types that choose their own
// content blocks. The blocks become Result.Content and the output's JSON
// becomes Result.Structured.
type ContentProvider interface {
	ToolContent() []*toolwirev1.Content
}

// toResult converts what a tool function returned into a Result:
//
//   - a *Result or Result is used as is (a nil *Result is an empty Result);
//   - a ContentProvider gives the content, its JSON the structured output;
//   - a string is one text block and no structured output;
//   - a nil pointer or interface is an empty Result;
//   - anything else is its JSON, both as structured output and as one text
//     block (MCP's convention for clients that read only content).
//
// The Result is always a fresh value whose Intents may be appended to.
func toResult[Out any](out Out) (*Result, error) {
	v := any(out) // boxed once: every use below shares it
	switch v := v.(type) {
	case *Result:
		if v == nil {
			return &Result{}, nil
		}
		r := *v
		r.Intents = slices.Clip(r.Intents)
		return &r, nil
	case Result:
		v.Intents = slices.Clip(v.Intents)
		return &v, nil
	case string:
		return &Result{Content: []*toolwirev1.Content{Text(v)}}, nil
	}
	if isNil(v) {
		return &Result{}, nil
	}
	structured, err := json.Marshal(v)
	if err != nil {
		return nil, &Error{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL,
			Message: "the tool's output cannot be encoded as JSON: " + err.Error(),
			// The function ran to completion.
			SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_POSSIBLE, Cause: err}
	}
	if cp, ok := v.(ContentProvider); ok {
		return &Result{Content: cp.ToolContent(), Structured: structured}, nil
	}
	return &Result{Content: []*toolwirev1.Content{Text(string(structured))}, Structured: structured}, nil
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
