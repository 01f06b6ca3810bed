package registry

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
)

// jsonCorpus covers the grammar's corners: the fuzz seeds and the table.
var jsonCorpus = []string{
	`{"text":"ping"}`, `{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1.5e-3`, `-12E+4`, `1E9`,
	`123456789012345678901234567890`, `{"a":1,"a":2}`, `{"a":[1,{"b":null}],"c":"x"}`,
	` {"a" : [ 1 , 2 ] } `, "\t\n\r[1]\r\n", `"\u00e9\ud83d\ude00\n\t\"\\\/\b\f\r"`,
	`"\ud800"`, `"\ud800\u0041"`, `"\udc00\ud800"`, `"\ud800\ud800\udc00"`, "\"\xff\xfe\"", "\"a\xe2\x82\"",
	"\"\xe2\\n\x82\xac\"", `"\u12"`, `"\u12zz"`, `"\x"`, "\"a\x01\"", `"abc`, `01`, `1.`, `.5`, `-`, `1e`,
	`1e+`, `+1`, `[1,]`, `{"a":1,}`, `{"a"}`, `{a:1}`, `[1 2]`, `{"a":1 "b":2}`, `tru`, `nul`, `falsey`,
	`1 2`, `{} x`, ``, ` `, `[`, `{`, `{"a":`, `"\`, "\xef\xbb\xbf{}", `[[[[]]]]`, `{"":""}`,
	`"\u0000"`, `[1e400]`, `-01`, `[-]`, `{"a":-}`,
}

func sameAsLibrary(t testing.TB, data []byte) {
	want, wantErr := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	got, err := parseJSON(data)
	if dup := (*DuplicateKeyError)(nil); errors.As(err, &dup) {
		// The one deliberate difference: the library keeps the last of
		// repeated keys, parseJSON refuses them (before reading on, so a
		// truncated document may fail with this error instead).
		return
	}
	if (wantErr != nil) != (err != nil) {
		t.Fatalf("%q: library error %v, ours %v", data, wantErr, err)
	}
	if wantErr == nil {
		require.Equal(t, want, got, "%q", data)
	}
}

// parseJSON returns what jsonschema.UnmarshalJSON returns, and fails
// where it fails, except that it refuses repeated keys.
func TestParseJSONMatchesLibrary(t *testing.T) {
	t.Parallel()
	for _, s := range jsonCorpus {
		sameAsLibrary(t, []byte(s))
	}
	deep := func(n int) []byte {
		return []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
	}
	sameAsLibrary(t, deep(10000))
	sameAsLibrary(t, deep(10001))
	_, err := parseJSON(deep(10001))
	require.ErrorContains(t, err, "exceeded max depth")
}

func FuzzParseJSON(f *testing.F) {
	for _, s := range jsonCorpus {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { sameAsLibrary(t, data) })
}

// Repeated keys are refused at every level, with the pointer of the
// repeated member; keys that differ only before unescaping are the same
// key.
func TestParseJSONRefusesDuplicateKeys(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]string{
		`{"path":"a","path":"/etc/passwd"}`:          "/path",
		`{"a":{"b":1,"b":2}}`:                        "/a/b",
		`{"a":[0,{"x":1},{"y":1,"y":2}]}`:            "/a/2/y",
		`[[{"k":1,"\u006b":2}]]`:                     "/0/0/k",
		`{"a/b":{"~":1,"~":2}}`:                      "/a~1b/~0",
		`{"ok":1,"nested":{"deep":[{"z":1,"z":1}]}}`: "/nested/deep/0/z",
	} {
		_, err := parseJSON([]byte(doc))
		var dup *DuplicateKeyError
		require.ErrorAs(t, err, &dup, doc)
		require.Equal(t, want, dup.Pointer, doc)
	}
	_, err := parseJSON([]byte(`{"a":{"k":1},"b":{"k":1},"c":[{"k":1},{"k":2}]}`))
	require.NoError(t, err, "the same key in different objects is no repeat")
}

// BenchmarkParse compares parseJSON with jsonschema.UnmarshalJSON (the
// decoder it replaces) on a small and a medium call's arguments.
func BenchmarkParse(b *testing.B) {
	for name, args := range map[string][]byte{
		"small":  []byte(`{"text":"ping"}`),
		"medium": []byte(`{"query":"select * from orders where region = 'eu' and total > 100","limit":50,"offset":0,"filters":[{"field":"status","op":"in","values":["open","pending","on hold"]},{"field":"created","op":">=","value":"2024-01-01T00:00:00Z"}],"options":{"explain":false,"timeout_ms":2500,"sample":0.25,"tags":["report","q3","\u00e9t\u00e9"],"notes":"line one\nline two\t(tabbed) \"quoted\""},"ids":[101,102,103,104,105,106,107,108],"path":"/data/reports/q3.csv"}`),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := parseJSON(args); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("library-"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := jsonschema.UnmarshalJSON(bytes.NewReader(args)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
