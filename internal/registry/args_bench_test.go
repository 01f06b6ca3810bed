package registry_test

import (
	"testing"

	"github.com/toolwire/toolwire/internal/registry"
)

// benchArgs are a small call's arguments (the echo tool's) and a medium
// one's: nested objects and arrays, escapes, integers and fractions.
var benchArgs = map[string][]byte{
	"small":  []byte(`{"text":"ping"}`),
	"medium": []byte(`{"query":"select * from orders where region = 'eu' and total > 100","limit":50,"offset":0,"filters":[{"field":"status","op":"in","values":["open","pending","on hold"]},{"field":"created","op":">=","value":"2024-01-01T00:00:00Z"}],"options":{"explain":false,"timeout_ms":2500,"sample":0.25,"tags":["report","q3","\u00e9t\u00e9"],"notes":"line one\nline two\t(tabbed) \"quoted\""},"ids":[101,102,103,104,105,106,107,108],"path":"/data/reports/q3.csv"}`),
}

// BenchmarkCheckArgs measures admission's whole argument check (limits,
// parse, schema) with an open object schema.
func BenchmarkCheckArgs(b *testing.B) {
	sch, err := registry.DefaultSchemas.Compile(`{"type":"object"}`)
	if err != nil {
		b.Fatal(err)
	}
	ent := &registry.Entry{Input: sch}
	l := registry.ArgLimits{MaxBytes: 1 << 20, MaxDepth: 32, MaxValues: 2048}
	for _, name := range []string{"small", "medium"} {
		args := benchArgs[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if te := registry.CheckArgs(ent, args, l); te != nil {
					b.Fatal(te)
				}
			}
		})
	}
}
