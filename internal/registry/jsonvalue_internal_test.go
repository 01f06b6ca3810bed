package registry

import (
	"bytes"
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
	if (wantErr != nil) != (err != nil) {
		t.Fatalf("%q: library error %v, ours %v", data, wantErr, err)
	}
	if wantErr == nil {
		require.Equal(t, want, got, "%q", data)
	}
}

// parseJSON returns what jsonschema.UnmarshalJSON returns, and fails
// where it fails.
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
