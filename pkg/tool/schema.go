package tool

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	resultType     = reflect.TypeFor[Result]()
)

// inputSchema returns the JSON Schema of the arguments a tool with input
// type In accepts. Arguments are always a JSON object, so In must be a
// struct, a map with string keys, or a pointer to either; json.RawMessage
// accepts any object and is passed through as the exact bytes.
func inputSchema[In any]() ([]byte, error) {
	t := reflect.TypeFor[In]()
	if t == rawMessageType {
		return []byte(`{"type":"object"}`), nil
	}
	s, err := schemaFor(t)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	markSecrets(t, s, 0)
	markSignificant(t, s)
	if s.Type != "object" {
		return nil, fmt.Errorf("input type %s is not a JSON object: use a struct or a map with string keys", t)
	}
	return json.Marshal(s)
}

// outputSchema returns the JSON Schema of a struct Out, or nil when Out is
// not a struct (or a pointer to one): such outputs have no declared schema.
func outputSchema[Out any]() ([]byte, error) {
	t := reflect.TypeFor[Out]()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == resultType {
		return nil, nil
	}
	s, err := schemaFor(t)
	if err != nil {
		return nil, fmt.Errorf("output schema: %w", err)
	}
	return json.Marshal(s)
}

// schemaFor infers the schema of t, ignoring the pointer at its root: a
// tool's arguments or output are never JSON null.
func schemaFor(t reflect.Type) (*jsonschema.Schema, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return jsonschema.ForType(t, &jsonschema.ForOptions{
		TypeSchemas: map[reflect.Type]*jsonschema.Schema{rawMessageType: {}},
	})
}

// SecretKeyword is the schema keyword that marks an argument secret: its
// value is replaced by "[REDACTED]" wherever the fabric shows or stores
// what a call produced — answers, errors, events, logs, dead letters,
// stored responses, audits and replays (the calls stream keeps the call
// itself, to run it). Native tools set it with the struct tag
// `toolwire:"secret"`:
//
//	type In struct {
//		User     string `json:"user"`
//		Password string `json:"password" toolwire:"secret"`
//	}
const SecretKeyword = "x-toolwire-secret"

// markSecrets sets SecretKeyword on the properties of s whose struct
// fields carry the tag `toolwire:"secret"`, in nested structs, slices and
// map values too.
func markSecrets(t reflect.Type, s *jsonschema.Schema, depth int) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s == nil || depth > 16 {
		return
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		markSecrets(t.Elem(), s.Items, depth+1)
	case reflect.Map:
		markSecrets(t.Elem(), s.AdditionalProperties, depth+1)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			prop := s.Properties[name]
			if prop == nil {
				continue
			}
			if slices.Contains(strings.Split(f.Tag.Get("toolwire"), ","), "secret") {
				if prop.Extra == nil {
					prop.Extra = map[string]any{}
				}
				prop.Extra[SecretKeyword] = true
				continue
			}
			markSecrets(f.Type, prop, depth+1)
		}
	}
}

// SignificantKeyword marks a top-level argument for the loop guard, which
// counts the same call made again and again in a session: true, the
// argument is one of those that make two calls different (once one is
// marked true, only the required arguments and the marked ones are
// compared); false, it is noise that never does unless it is required (a
// reason, a trace id). Native tools set it with the struct tags
// `toolwire:"significant"` and `toolwire:"noise"`. An optional argument
// that is null or equal to its schema's default never makes a call
// different either.
const SignificantKeyword = "x-toolwire-significant"

// markSignificant sets SignificantKeyword on the top-level properties of
// s whose struct fields carry `toolwire:"significant"` or
// `toolwire:"noise"`.
func markSignificant(t reflect.Type, s *jsonschema.Schema) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		prop := s.Properties[name]
		tags := strings.Split(f.Tag.Get("toolwire"), ",")
		if !f.IsExported() || name == "-" || prop == nil {
			continue
		}
		for tag, v := range map[string]bool{"significant": true, "noise": false} {
			if slices.Contains(tags, tag) {
				if prop.Extra == nil {
					prop.Extra = map[string]any{}
				}
				prop.Extra[SignificantKeyword] = v
			}
		}
	}
}
