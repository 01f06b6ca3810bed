package registry_test

import (
	"testing"

	"github.com/toolwire/toolwire/internal/registry"
)

// BenchmarkValidateArgs measures admission's schema check of a small
// call (the echo tool's arguments).
func BenchmarkValidateArgs(b *testing.B) {
	sch, err := registry.DefaultSchemas.Compile(`{"type":"object","properties":{"text":{"type":"string","description":"the text to return"}},"required":["text"],"additionalProperties":false}`)
	if err != nil {
		b.Fatal(err)
	}
	args := []byte(`{"text":"ping"}`)
	b.ReportAllocs()
	for b.Loop() {
		if vs := registry.ValidateArgs(sch, args); vs != nil {
			b.Fatal(vs)
		}
	}
}
