package tool

import (
	"encoding/json"
	"fmt"
	"reflect"

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
