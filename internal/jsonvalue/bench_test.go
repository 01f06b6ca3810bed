package jsonvalue_test

import (
	"bytes"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/toolwire/toolwire/internal/jsonvalue"
)

// benchArgs are a small call's arguments (the echo tool's) and a medium
// one's: nested objects and arrays, escapes, integers and fractions.
var benchArgs = []struct {
	name string
	text []byte
}{
	{"small", []byte(`{"text":"ping"}`)},
	{"medium", []byte(`{"query":"select * from orders where region = 'eu' and total > 100","limit":50,"offset":0,"filters":[{"field":"status","op":"in","values":["open","pending","on hold"]},{"field":"created","op":">=","value":"2024-01-01T00:00:00Z"}],"options":{"explain":false,"timeout_ms":2500,"sample":0.25,"tags":["report","q3","\u00e9t\u00e9"],"notes":"line one\nline two\t(tabbed) \"quoted\""},"ids":[101,102,103,104,105,106,107,108],"path":"/data/reports/q3.csv"}`)},
}

// BenchmarkParse compares Parse with jsonschema.UnmarshalJSON (the
// decoder whose value the schema form is).
func BenchmarkParse(b *testing.B) {
	for _, a := range benchArgs {
		b.Run(a.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := jsonvalue.Parse(a.text); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("library-"+a.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := jsonschema.UnmarshalJSON(bytes.NewReader(a.text)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkForms measures each derived form of a parsed text (the parse
// included: a Doc builds each form once).
func BenchmarkForms(b *testing.B) {
	for _, a := range benchArgs {
		for _, f := range []struct {
			name string
			use  func(*jsonvalue.Doc)
		}{
			{"Native", func(d *jsonvalue.Doc) { d.Native() }},
			{"Canonical", func(d *jsonvalue.Doc) { d.Canonical() }},
			{"SHA256", func(d *jsonvalue.Doc) { d.SHA256() }},
			{"all", func(d *jsonvalue.Doc) { d.Native(); d.SHA256() }},
		} {
			b.Run(f.name+"/"+a.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					d, err := jsonvalue.Parse(a.text)
					if err != nil {
						b.Fatal(err)
					}
					f.use(d)
				}
			})
		}
	}
}
