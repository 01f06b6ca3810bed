package policy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/jsonvalue"
	"github.com/toolwire/toolwire/internal/policy"
)

// Equal values have one canonical form, whatever the key order, white
// space, number spelling or string escapes.
func TestCanonicalEqualValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ a, b, want string }{
		{`{"a":1,"b":2}`, `{"b":2,"a":1.0}`, `{"a":1,"b":2}`},
		{` { "b" : [ 1 , 2.50 ] ,"a":{"y":true,"x":null}} `, `{"a":{"x":null,"y":true},"b":[1e0,25e-1]}`, `{"a":{"x":null,"y":true},"b":[1,2.5]}`},
		{`{"s":"\u0041\/\u00e9"}`, `{"s":"A/é"}`, `{"s":"A/é"}`},
		{`{"s":"\ud83d\ude00"}`, `{"s":"😀"}`, `{"s":"😀"}`},
		{`{"s":"tab\there \u0001"}`, `{"s":"tab\u0009here \u0001"}`, `{"s":"tab\there \u0001"}`},
		{`{"n":-0}`, `{"n":0.0}`, `{"n":0}`},
		{`{"n":100}`, `{"n":1e2}`, `{"n":100}`},
		{`{"n":1E+21}`, `{"n":1000000000000000000000}`, `{"n":1e+21}`},
		{`{"n":0.000001}`, `{"n":1e-6}`, `{"n":0.000001}`},
		{`{"n":0.0000001}`, `{"n":1e-7}`, `{"n":1e-7}`},
		{`{"n":123.456e1}`, `{"n":1234.56}`, `{"n":1234.56}`},
		{`{"n":-1.50e-10}`, `{"n":-0.00000000015}`, `{"n":-1.5e-10}`},
		{`{"é":1,"z":2,"a":3}`, `{"a":3,"z":2,"é":1}`, `{"a":3,"z":2,"é":1}`},
		{``, `{}`, `{}`},
	} {
		a, err := policy.ParseArgs([]byte(tc.a))
		require.NoError(t, err, tc.a)
		b, err := policy.ParseArgs([]byte(tc.b))
		require.NoError(t, err, tc.b)
		require.Equal(t, tc.want, string(a.Canonical()), tc.a)
		require.Equal(t, tc.want, string(b.Canonical()), tc.b)
		require.Equal(t, a.SHA256(), b.SHA256())
		require.Equal(t, a.Hash(), b.Hash())
		require.Len(t, a.Hash(), 64)
	}
}

// Different values have different canonical forms, including numbers a
// float64 cannot tell apart and one changed byte.
func TestCanonicalDifferentValues(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]string{
		{`{"id":9007199254740993}`, `{"id":9007199254740992}`},
		{`{"n":1}`, `{"n":"1"}`},
		{`{"a":"x"}`, `{"a":"y"}`},
		{`{"a":[1,2]}`, `{"a":[2,1]}`},
		{`{"a":null}`, `{}`},
		{`{"n":0.1}`, `{"n":0.10000000000000001}`},
	} {
		a, err := policy.ParseArgs([]byte(pair[0]))
		require.NoError(t, err)
		b, err := policy.ParseArgs([]byte(pair[1]))
		require.NoError(t, err)
		require.NotEqual(t, a.Hash(), b.Hash(), pair)
	}
}

func TestCanonicalValue(t *testing.T) {
	t.Parallel()
	a, err := policy.ParseArgs([]byte(`{"i":3,"w":2.0,"f":1.5,"big":1e300,"huge":1e400,"s":"x","b":false,"n":null,"l":[1,{"k":"v"}]}`))
	require.NoError(t, err)
	v := a.Value()
	require.Equal(t, int64(3), v["i"])
	require.Equal(t, int64(2), v["w"])
	require.Equal(t, 1.5, v["f"])
	require.Equal(t, 1e300, v["big"])
	require.Greater(t, v["huge"].(float64), 1e308)
	require.Equal(t, "x", v["s"])
	require.Equal(t, false, v["b"])
	require.Nil(t, v["n"])
	require.Equal(t, []any{int64(1), map[string]any{"k": "v"}}, v["l"])

	var nilArgs *policy.Args
	require.Equal(t, "{}", string(nilArgs.Canonical()))
	require.Empty(t, nilArgs.Value())
}

// ParseArgs refuses what is not JSON, and what JSON decoders would read
// differently (duplicate keys, invalid strings): such arguments have no
// single canonical form.
func TestCanonicalRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want error
	}{
		{`{"a":1,"a":2}`, policy.ErrDuplicateKey},
		{`{"a":{"b":1,"b":1}}`, policy.ErrDuplicateKey},
		{"{\"a\":\"\xff\"}", policy.ErrInvalidString},
		{`{"a":"\ud800"}`, policy.ErrInvalidString},
		{`{"a":"\udc00\ud800"}`, policy.ErrInvalidString},
		{`{"a":"\ud800x"}`, policy.ErrInvalidString},
		{`{"n":1e9999999999}`, policy.ErrNumberRange},
		{`[1]`, policy.ErrNotObject},
		{`"x"`, policy.ErrNotObject},
		{`{"a":1}x`, policy.ErrInvalidJSON},
		{`{"a":01}`, policy.ErrInvalidJSON},
		{`{"a":1.}`, policy.ErrInvalidJSON},
		{`{"a":.5}`, policy.ErrInvalidJSON},
		{`{"a":+1}`, policy.ErrInvalidJSON},
		{`{"a":1e}`, policy.ErrInvalidJSON},
		{`{"a":tru}`, policy.ErrInvalidJSON},
		{`{"a":"x`, policy.ErrInvalidJSON},
		{"{\"a\":\"\n\"}", policy.ErrInvalidJSON},
		{`{"a":"\x"}`, policy.ErrInvalidJSON},
		{`{"a":"\u12"}`, policy.ErrInvalidJSON},
		{`{a:1}`, policy.ErrInvalidJSON},
		{`{"a" 1}`, policy.ErrInvalidJSON},
		{`{"a":1,}`, policy.ErrInvalidJSON},
		{`{"a":[1,]}`, policy.ErrInvalidJSON},
		{`{"a":[1 2]}`, policy.ErrInvalidJSON},
		{`{"a":1`, policy.ErrInvalidJSON},
		{`{"a":`, policy.ErrInvalidJSON},
		{`{"a":[`, policy.ErrInvalidJSON},
		{`{"a":NaN}`, policy.ErrInvalidJSON},
		{`{"a":-}`, policy.ErrInvalidJSON},
		{string(bytes.Repeat([]byte(`{"a":`), policy.MaxArgsDepth+1)), policy.ErrTooDeep},
		{`{"a":` + string(bytes.Repeat([]byte(`[`), policy.MaxArgsDepth+1)), policy.ErrTooDeep},
	} {
		_, err := policy.ParseArgs([]byte(tc.in))
		require.ErrorIs(t, err, tc.want, "%q", tc.in)
	}
}

// FuzzCanonical checks the canonical form against encoding/json:
//   - it accepts every valid JSON text but the ones it refuses on purpose
//     (duplicate keys, invalid strings, range, depth), and nothing else;
//   - the canonical text is valid JSON that decodes (with encoding/json)
//     to a value equal to the input's, and is its own canonical form;
//   - a round trip through encoding/json that keeps the values (decode
//     with UseNumber, encode again: other key order, other escapes, other
//     spacing) gives the same canonical form.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":2}`, `{"b":2,"a":1.0}`, `[1,"x",null,true,{"k":[]}]`, `"\u00e9\ud83d\ude00<>&"`,
		`{"n":-0.0e-0,"m":1E+300,"o":123456789012345678901234567890}`, `{"a":{"a":{"a":"\n\t\\\""}}}`,
		`{"a":1,"a":2}`, "\"\xff\"", `"\ud800"`, `1e1000000000000`, ` {} `, `0.1`, `-12.5e-3`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		canon, err := policy.Canonicalize(data)
		if !json.Valid(data) {
			require.Error(t, err, "accepted invalid JSON %q", data)
			return
		}
		if err != nil {
			for _, allowed := range []error{policy.ErrDuplicateKey, policy.ErrInvalidString, policy.ErrNumberRange, policy.ErrTooDeep} {
				if errors.Is(err, allowed) {
					return
				}
			}
			t.Fatalf("refused valid JSON %q: %v", data, err)
		}
		require.True(t, json.Valid(canon), "canonical form %q of %q is not JSON", canon, data)
		again, err := policy.Canonicalize(canon)
		require.NoError(t, err)
		require.Equal(t, string(canon), string(again), "not idempotent")

		var want, got any
		errWant := json.Unmarshal(data, &want)
		errGot := json.Unmarshal(canon, &got)
		require.Equal(t, errWant == nil, errGot == nil, "%q → %q: %v / %v", data, canon, errWant, errGot)
		if errWant == nil && !reflect.DeepEqual(want, got) {
			t.Fatalf("%q → %q: values differ: %#v / %#v", data, canon, want, got)
		}

		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		require.NoError(t, dec.Decode(&v))
		re, err := json.Marshal(v)
		require.NoError(t, err)
		recanon, err := policy.Canonicalize(re)
		require.NoError(t, err, "%q", re)
		require.Equal(t, string(canon), string(recanon), "%q and its round trip %q", data, re)
	})
}

// ArgsFrom gives the arguments of a text parsed already (the Doc admission
// shares): the forms ParseArgs gives, derived from that one Doc.
func TestArgsFrom(t *testing.T) {
	t.Parallel()
	doc, err := jsonvalue.Parse([]byte(`{"b":1.0,"a":["x",2]}`))
	require.NoError(t, err)
	a, err := policy.ArgsFrom(doc)
	require.NoError(t, err)
	require.Same(t, doc, a.Doc())
	want, err := policy.ParseArgs(doc.Raw())
	require.NoError(t, err)
	require.Equal(t, want.Value(), a.Value())
	require.Equal(t, `{"a":["x",2],"b":1}`, string(a.Canonical()))
	require.Equal(t, want.Hash(), a.Hash())

	list, err := jsonvalue.Parse([]byte(`[1]`))
	require.NoError(t, err)
	_, err = policy.ArgsFrom(list)
	require.ErrorIs(t, err, policy.ErrNotObject)

	var none *policy.Args
	require.Equal(t, "{}", string(none.Doc().Canonical()))
}
