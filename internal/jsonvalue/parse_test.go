package jsonvalue_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/jsonvalue"
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
	`"\u0000"`, `[1e400]`, `-01`, `[-]`, `{"a":-}`, `1e999999999`, `1e0000000000001`, `1e1000000000`,
	`1E-0999999999`, `"\ud800\u12"`, `"\ud83d\ude00\ud83d"`, `{"a":"\ud800`,
}

// onPurpose are the kinds of refusal of a text encoding/json accepts.
var onPurpose = []error{jsonvalue.ErrDuplicateKey, jsonvalue.ErrInvalidString, jsonvalue.ErrNumberRange, jsonvalue.ErrTooDeep}

// sameAsLibrary holds Parse to jsonschema.UnmarshalJSON (encoding/json
// with UseNumber): what Parse accepts the library accepts, and its schema
// form is the library's value; what the library refuses Parse refuses; a
// text Parse refuses as not JSON the library refuses too. The rest are
// Parse's refusals on purpose (doc.go, "Rules").
func sameAsLibrary(t testing.TB, data []byte) {
	want, wantErr := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	doc, err := jsonvalue.Parse(data)
	switch {
	case err == nil:
		require.NoError(t, wantErr, "%q: accepted what the library refuses", data)
		require.Equal(t, want, doc.Schema(), "%q", data)
	case wantErr != nil:
	case errors.Is(err, jsonvalue.ErrSyntax):
		t.Fatalf("%q: refused as not JSON what the library accepts: %v", data, err)
	default:
		for _, kind := range onPurpose {
			if errors.Is(err, kind) {
				return
			}
		}
		t.Fatalf("%q: refused with %v, of no kind", data, err)
	}
}

// Parse returns what jsonschema.UnmarshalJSON returns, and fails where it
// fails, but for its refusals on purpose.
func TestParseMatchesLibrary(t *testing.T) {
	t.Parallel()
	for _, s := range jsonCorpus {
		sameAsLibrary(t, []byte(s))
	}
	deep := func(n int) []byte {
		return []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
	}
	sameAsLibrary(t, deep(jsonvalue.MaxDepth))
	sameAsLibrary(t, deep(jsonvalue.MaxDepth+1))
	sameAsLibrary(t, deep(10001))
}

func FuzzParse(f *testing.F) {
	for _, s := range jsonCorpus {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsLibrary(t, data)
		doc, err := jsonvalue.Parse(data)
		if err != nil {
			return
		}
		// The canonical text denotes the same value: its own forms are
		// the original's, and it is its own canonical text.
		again, err := jsonvalue.Parse(doc.Canonical())
		require.NoError(t, err, "%q → %q", data, doc.Canonical())
		require.Equal(t, string(doc.Canonical()), string(again.Canonical()))
		require.Equal(t, doc.Native(), again.Native(), "%q → %q", data, doc.Canonical())
	})
}

// The refusals on purpose, each with its kind and where it was found.
func TestParseRefusesOnPurpose(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in     string
		kind   error
		offset int
	}{
		{"{\"a\":\"x\xff\"}", jsonvalue.ErrInvalidString, 7},
		{"{\"a\":\"\\n\xe2\x82\"}", jsonvalue.ErrInvalidString, 8},
		{`{"a":"\ud800"}`, jsonvalue.ErrInvalidString, 6},
		{`{"a":"x\udc00\ud800"}`, jsonvalue.ErrInvalidString, 7},
		{`{"a":"\ud800x"}`, jsonvalue.ErrInvalidString, 6},
		{`{"a":"\ud800\u0041"}`, jsonvalue.ErrInvalidString, 6},
		{`[1e1000000000]`, jsonvalue.ErrNumberRange, 1},
		{`[-1.5E-1000000000]`, jsonvalue.ErrNumberRange, 1},
		{strings.Repeat("[", jsonvalue.MaxDepth+1), jsonvalue.ErrTooDeep, jsonvalue.MaxDepth},
		{strings.Repeat(`{"a":`, jsonvalue.MaxDepth+1), jsonvalue.ErrTooDeep, 5 * jsonvalue.MaxDepth},
	} {
		_, err := jsonvalue.Parse([]byte(tc.in))
		require.ErrorIs(t, err, tc.kind, "%q", tc.in)
		var e *jsonvalue.Error
		require.ErrorAs(t, err, &e, "%q", tc.in)
		require.Equal(t, tc.offset, e.Offset, "%q: %v", tc.in, err)
	}
	for _, ok := range []string{`[1e999999999]`, `[1e-0000000000999999999]`, `"\ud83d\ude00"`, strings.Repeat("[", jsonvalue.MaxDepth) + strings.Repeat("]", jsonvalue.MaxDepth)} {
		_, err := jsonvalue.Parse([]byte(ok))
		require.NoError(t, err, ok)
	}
}

// A text that is not JSON is refused in encoding/json's words, with the
// offset.
func TestParseSyntaxErrors(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"a" 1}`:  `invalid character '1' after object key (offset 5)`,
		`[1,]`:     `invalid character ']' looking for beginning of value (offset 3)`,
		`{"a":1`:   `unexpected end of JSON input (offset 6)`,
		``:         `unexpected end of JSON input (offset 0)`,
		`"\x"`:     `invalid character 'x' in string escape code (offset 2)`,
		`"\u12zz"`: `invalid character 'z' in \u hexadecimal character escape (offset 5)`,
		`01`:       `invalid character '1' after top-level value (offset 1)`,
	} {
		_, err := jsonvalue.Parse([]byte(in))
		require.ErrorIs(t, err, jsonvalue.ErrSyntax, in)
		require.EqualError(t, err, want, in)
	}
}

// Repeated keys are refused at every level, with the pointer of the
// repeated member; keys that differ only before unescaping are the same
// key.
func TestParseRefusesDuplicateKeys(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]string{
		`{"path":"a","path":"/etc/passwd"}`:          "/path",
		`{"a":{"b":1,"b":2}}`:                        "/a/b",
		`{"a":[0,{"x":1},{"y":1,"y":2}]}`:            "/a/2/y",
		`[[{"k":1,"\u006b":2}]]`:                     "/0/0/k",
		`{"a/b":{"~":1,"~":2}}`:                      "/a~1b/~0",
		`{"ok":1,"nested":{"deep":[{"z":1,"z":1}]}}`: "/nested/deep/0/z",
	} {
		_, err := jsonvalue.Parse([]byte(doc))
		var dup *jsonvalue.DuplicateKeyError
		require.ErrorAs(t, err, &dup, doc)
		require.Equal(t, want, dup.Pointer, doc)
		require.ErrorIs(t, err, jsonvalue.ErrDuplicateKey, doc)
	}
	_, err := jsonvalue.Parse([]byte(`{"a":{"k":1},"b":{"k":1},"c":[{"k":1},{"k":2}]}`))
	require.NoError(t, err, "the same key in different objects is no repeat")
}
