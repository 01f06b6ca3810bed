package jsonvalue_test

import (
	"crypto/sha256"
	"encoding/json"
	"reflect"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/jsonvalue"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"
)

// Every goroutine a test starts has ended when the tests have.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }

func parse(t *testing.T, s string) *jsonvalue.Doc {
	t.Helper()
	doc, err := jsonvalue.Parse([]byte(s))
	require.NoError(t, err, s)
	return doc
}

// The schema form keeps numbers as written; the native form makes them
// int64 when whole and in range, float64 otherwise; both agree on
// everything else.
func TestForms(t *testing.T) {
	t.Parallel()
	doc := parse(t, `{"i":3,"w":2.0,"e":1e2,"z":-0,"f":1.5,"big":1e300,"huge":1e400,"wide":9223372036854775808,"s":"x","b":false,"n":null,"l":[1,{"k":"v"}]}`)
	schema, ok := doc.Object()
	require.True(t, ok)
	require.Equal(t, json.Number("2.0"), schema["w"])
	require.Equal(t, json.Number("9223372036854775808"), schema["wide"])

	v := doc.Native().(map[string]any)
	for k, want := range map[string]any{"i": int64(3), "w": int64(2), "e": int64(100), "z": int64(0), "f": 1.5, "big": 1e300, "wide": 9223372036854775808.0, "s": "x", "b": false, "n": nil} {
		require.Equal(t, want, v[k], k)
	}
	require.Greater(t, v["huge"].(float64), 1e308)
	require.Equal(t, []any{int64(1), map[string]any{"k": "v"}}, v["l"])
	require.Equal(t, `{"b":false,"big":1e+300,"e":100,"f":1.5,"huge":1e+400,"i":3,"l":[1,{"k":"v"}],"n":null,"s":"x","w":2,"wide":9223372036854775808,"z":0}`, string(doc.Canonical()))
	require.Equal(t, sha256.Sum256(doc.Canonical()), doc.SHA256())

	_, ok = parse(t, `[1]`).Object()
	require.False(t, ok)
}

// The native form shares what holds no number with the schema form, and
// copies what does: the schema form is never changed.
func TestNativeSharesWhatHoldsNoNumber(t *testing.T) {
	t.Parallel()
	doc := parse(t, `{"n":1,"words":{"a":"x"},"list":["y"],"deep":{"m":[{"k":2}]}}`)
	schema, _ := doc.Object()
	native := doc.Native().(map[string]any)
	same := func(a, b any) bool { return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() }
	require.False(t, same(schema, native))
	require.True(t, same(schema["words"], native["words"]))
	require.True(t, same(schema["list"], native["list"]))
	require.False(t, same(schema["deep"], native["deep"]))
	require.Equal(t, json.Number("2"), schema["deep"].(map[string]any)["m"].([]any)[0].(map[string]any)["k"])
	require.Equal(t, int64(2), native["deep"].(map[string]any)["m"].([]any)[0].(map[string]any)["k"])

	words := parse(t, `{"a":["x",{"b":null}]}`)
	s, _ := words.Object()
	require.True(t, same(s, words.Native()), "no number anywhere: one value")
}

// Forms are built once, whoever asks first, and are safe to ask for from
// many goroutines.
func TestFormsConcurrently(t *testing.T) {
	t.Parallel()
	doc := parse(t, `{"b":[1,2.5,{"c":"d"}],"a":1e1}`)
	var wg sync.WaitGroup
	natives := make([]any, 8)
	canons := make([][]byte, 8)
	for i := range 8 {
		wg.Go(func() {
			natives[i], canons[i] = doc.Native(), doc.Canonical()
			_ = doc.SHA256()
		})
	}
	wg.Wait()
	for i := range 8 {
		require.Equal(t, reflect.ValueOf(natives[0]).UnsafePointer(), reflect.ValueOf(natives[i]).UnsafePointer())
		require.Equal(t, &canons[0][0], &canons[i][0])
	}
	require.Equal(t, `{"a":10,"b":[1,2.5,{"c":"d"}]}`, string(canons[0]))
}

// CanonicalNumber and NativeNumber read one number by Parse's rules.
func TestNumber(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"1.0": "1", "-0": "0", "10E-1": "1", "1e21": "1e+21", "0.0000001": "1e-7", "9007199254740993": "9007199254740993"} {
		got, err := jsonvalue.CanonicalNumber(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	n, err := jsonvalue.NativeNumber("2.50e1")
	require.NoError(t, err)
	require.Equal(t, int64(25), n)
	for in, kind := range map[string]error{"": jsonvalue.ErrSyntax, "+1": jsonvalue.ErrSyntax, "1 ": jsonvalue.ErrSyntax, ".5": jsonvalue.ErrSyntax, "1e1000000000": jsonvalue.ErrNumberRange} {
		_, err := jsonvalue.CanonicalNumber(in)
		require.ErrorIs(t, err, kind, in)
		_, err = jsonvalue.NativeNumber(in)
		require.ErrorIs(t, err, kind, in)
	}
	require.Equal(t, `x"tab\there \u0001 \"q\" \\ é"`, string(jsonvalue.AppendCanonicalString([]byte("x"), "tab\there \x01 \"q\" \\ é")))
}
