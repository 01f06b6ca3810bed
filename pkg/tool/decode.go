package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// decodeArgs decodes the arguments of a call into in. Empty arguments
// decode as an empty object; a json.RawMessage receives args unchanged.
// Errors are VALIDATION *Errors naming the offending field as a JSON
// Pointer when the decoder says which.
func decodeArgs[In any](args []byte, in *In) error {
	if raw, ok := any(in).(*json.RawMessage); ok {
		*raw = args
		return nil
	}
	if len(bytes.TrimSpace(args)) == 0 {
		return nil
	}
	err := json.Unmarshal(args, in)
	if err == nil {
		return nil
	}
	var (
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
	)
	switch {
	case errors.As(err, &typeErr):
		msg := fmt.Sprintf("want %s, got %s", jsonKind(typeErr.Type), typeErr.Value)
		return InvalidArgument(locate(args, typeErr), msg)
	case errors.As(err, &syntaxErr):
		return invalidArguments("the arguments are not valid JSON: " + syntaxErr.Error())
	default:
		return invalidArguments(err.Error())
	}
}

func invalidArguments(msg string) *Error {
	return &Error{
		Type:        toolwirev1.ErrorType_ERROR_TYPE_VALIDATION,
		Message:     msg,
		SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE,
		Violations:  []*toolwirev1.FieldViolation{{Message: msg}},
	}
}

// locate turns the dotted Go-side path of a type error ("items.n", which
// names neither array indexes nor map keys) into a JSON Pointer into args
// ("/items/1/n") by finding the first value along that path whose JSON kind
// is the one the decoder rejected. It falls back to the dotted path's
// pointer form when the search fails.
func locate(args []byte, e *json.UnmarshalTypeError) string {
	if e.Field == "" {
		return ""
	}
	names := strings.Split(e.Field, ".")
	var doc any
	if json.Unmarshal(args, &doc) == nil {
		// Value is "string", "number", "number 1e400", "array", ...
		kind, _, _ := strings.Cut(e.Value, " ")
		if ptr, ok := find(doc, names, kind); ok {
			return ptr
		}
	}
	var b strings.Builder
	for _, n := range names {
		b.WriteString("/" + escapePointer(n))
	}
	return b.String()
}

// find walks doc along names, descending into every array element and, for
// maps decoded into Go maps, every key, and returns the pointer of the
// first value of the given JSON kind at the end of the path.
func find(doc any, names []string, kind string) (string, bool) {
	if len(names) == 0 {
		return "", valueKind(doc) == kind
	}
	switch v := doc.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		// The field itself, matched as encoding/json does: exactly, then
		// case-insensitively.
		for _, k := range keys {
			if k == names[0] {
				if p, ok := find(v[k], names[1:], kind); ok {
					return "/" + escapePointer(k) + p, true
				}
			}
		}
		for _, k := range keys {
			if k != names[0] && strings.EqualFold(k, names[0]) {
				if p, ok := find(v[k], names[1:], kind); ok {
					return "/" + escapePointer(k) + p, true
				}
			}
		}
		// A key of a Go map, which the path leaves out.
		for _, k := range keys {
			if p, ok := find(v[k], names, kind); ok {
				return "/" + escapePointer(k) + p, true
			}
		}
	case []any:
		for i, e := range v {
			if p, ok := find(e, names, kind); ok {
				return "/" + strconv.Itoa(i) + p, true
			}
		}
	}
	return "", false
}

func valueKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return ""
}

// jsonKind names the JSON type that decodes into t.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return t.String()
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
