package policy_test

import (
	"testing"

	"github.com/toolwire/toolwire/internal/policy"
)

// benchMedium is a medium call's arguments: nested objects and arrays,
// escapes, integers and fractions.
var benchMedium = []byte(`{"query":"select * from orders where region = 'eu' and total > 100","limit":50,"offset":0,"filters":[{"field":"status","op":"in","values":["open","pending","on hold"]},{"field":"created","op":">=","value":"2024-01-01T00:00:00Z"}],"options":{"explain":false,"timeout_ms":2500,"sample":0.25,"tags":["report","q3","\u00e9t\u00e9"],"notes":"line one\nline two\t(tabbed) \"quoted\""},"ids":[101,102,103,104,105,106,107,108],"path":"/data/reports/q3.csv"}`)

// BenchmarkArgs measures reading a call's arguments for the policy:
// ParseArgs alone, ParseArgs with every form a decision can use (the
// value, the canonical text, its hash), Canonicalize and ArgsDigest.
func BenchmarkArgs(b *testing.B) {
	for name, raw := range map[string][]byte{"small": benchRaw, "medium": benchMedium} {
		b.Run("ParseArgs/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := policy.ParseArgs(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("ParseArgs+Value+Hash/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				a, err := policy.ParseArgs(raw)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = a.Value(), a.Hash()
			}
		})
		b.Run("Canonicalize/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := policy.Canonicalize(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("ArgsDigest/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := policy.ArgsDigest(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
