package policy_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/policy"
)

// Optional members that change nothing — null, the declared default, a
// property marked noise — leave the loop guard's fingerprint alone; a
// required or significant one changes it.
func TestLoopFieldsLeaveOutNoise(t *testing.T) {
	schema := `{"type":"object","required":["q"],"properties":{
		"q":{"type":"string"},
		"limit":{"type":"integer","default":10},
		"reason":{"type":"string","x-toolwire-significant":false},
		"page":{"type":"integer"}}}`
	f := policy.CompileLoopFields([]byte(schema))
	require.NotNil(t, f)
	fp := func(args string) string {
		a, err := policy.ParseArgs([]byte(args))
		require.NoError(t, err)
		return f.Fingerprint("search", a)
	}
	base := fp(`{"q":"x"}`)
	for _, same := range []string{`{"q":"x","limit":10}`, `{"q":"x","limit":1e1}`, `{"q":"x","reason":"retrying"}`,
		`{"reason":"again","q":"x","page":null}`} {
		require.Equal(t, base, fp(same), same)
	}
	for _, other := range []string{`{"q":"y"}`, `{"q":"x","limit":11}`, `{"q":"x","page":2}`} {
		require.NotEqual(t, base, fp(other), other)
	}
	// Without a schema every member counts, as before.
	a, err := policy.ParseArgs([]byte(`{"q":"x","reason":"r"}`))
	require.NoError(t, err)
	var none *policy.LoopFields
	plain, err := policy.Fingerprint("search", []byte(`{"q":"x","reason":"r"}`))
	require.NoError(t, err)
	require.Equal(t, plain, none.Fingerprint("search", a))
}

// Once a property is marked significant, only the required and the marked
// ones are compared.
func TestLoopFieldsOnlySignificant(t *testing.T) {
	f := policy.CompileLoopFields([]byte(`{"type":"object","required":["path"],"properties":{
		"path":{"type":"string"},"offset":{"type":"integer","x-toolwire-significant":true},"trace_id":{"type":"string"}}}`))
	fp := func(args string) string {
		a, err := policy.ParseArgs([]byte(args))
		require.NoError(t, err)
		return f.Fingerprint("read", a)
	}
	require.Equal(t, fp(`{"path":"a"}`), fp(`{"path":"a","trace_id":"123"}`))
	require.NotEqual(t, fp(`{"path":"a"}`), fp(`{"path":"a","offset":5}`))
	require.NotEqual(t, fp(`{"path":"a"}`), fp(`{"path":"b"}`))
	require.Nil(t, policy.CompileLoopFields([]byte(`{not json`)))
}
