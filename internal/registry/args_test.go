package registry_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/jsonvalue"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// entry is an Entry of a tool with input schema and spec limits.
func entry(t *testing.T, schema string, limits *toolwirev1.Limits) *registry.Entry {
	t.Helper()
	sch, err := registry.DefaultSchemas.Compile(schema)
	require.NoError(t, err)
	return &registry.Entry{Spec: &toolwirev1.ToolSpec{Name: "t", InputSchemaJson: schema, Limits: limits}, Input: sch}
}

// CheckArgs, the one argument check of admission and of the worker: the
// spec's limits win over the caller's, a broken limit is one violation at
// the root, MaxValues 0 counts nothing, and the schema's violations are
// listed up to MaxViolations.
func TestCheckArgs(t *testing.T) {
	t.Parallel()
	limits := registry.ArgLimits{MaxBytes: 1 << 10, MaxDepth: 4, MaxValues: 8}
	open := entry(t, `{"type":"object"}`, nil)
	require.Nil(t, registry.CheckArgs(open, []byte(`{"a":[1,2]}`), limits))

	for name, c := range map[string]struct {
		ent  *registry.Entry
		args string
		l    registry.ArgLimits
		want string
	}{
		"size":                 {open, `{"a":"` + strings.Repeat("x", 2000) + `"}`, limits, "arguments are 2008 bytes, over the limit of 1024"},
		"size, spec's limit":   {entry(t, `{"type":"object"}`, &toolwirev1.Limits{MaxArgsBytes: 8}), `{"a":"xyz"}`, limits, "over the limit of 8"},
		"depth":                {open, `{"a":[[[[1]]]]}`, limits, "arguments nest deeper than the limit of 4"},
		"depth, spec's limit":  {entry(t, `{"type":"object"}`, &toolwirev1.Limits{MaxArgsDepth: 1}), `{"a":[1]}`, limits, "deeper than the limit of 1"},
		"members and elements": {open, `{"a":[1,2,3,4,5,6,7,8,9]}`, limits, "arguments have more than the limit of 8 members and elements"},
	} {
		te := registry.CheckArgs(c.ent, []byte(c.args), c.l)
		require.NotNil(t, te, name)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_VALIDATION, te.Type, name)
		require.False(t, te.Retryable, name)
		require.Equal(t, toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE, te.PartialSideEffects, name)
		require.Contains(t, te.Message, c.want, name)
		require.Len(t, te.Violations, 1, name)
		require.Empty(t, te.Violations[0].Field, name)
	}
	uncounted := registry.ArgLimits{MaxBytes: 1 << 10, MaxDepth: 4}
	require.Nil(t, registry.CheckArgs(open, []byte(`{"a":[1,2,3,4,5,6,7,8,9]}`), uncounted), "MaxValues 0 counts nothing")

	var props, args []string
	for i := range registry.MaxViolations + 5 {
		props = append(props, fmt.Sprintf(`"p%02d":{"type":"string"}`, i))
		args = append(args, fmt.Sprintf(`"p%02d":%d`, i, i))
	}
	typed := entry(t, `{"type":"object","properties":{`+strings.Join(props, ",")+`}}`, nil)
	te := registry.CheckArgs(typed, []byte(`{`+strings.Join(args, ",")+`}`), registry.ArgLimits{MaxBytes: 1 << 20, MaxDepth: 4})
	require.NotNil(t, te)
	require.Len(t, te.Violations, registry.MaxViolations)
	require.True(t, strings.HasPrefix(te.Message, "invalid arguments: p00: "), te.Message)
	require.True(t, strings.HasSuffix(te.Message, "; and 5 more"), te.Message)
}

// Violation names the field in its message, except the root.
func TestViolation(t *testing.T) {
	t.Parallel()
	te := registry.Violation("/a/0", "is required")
	require.Equal(t, "a/0: is required", te.Message)
	require.Equal(t, []*toolwirev1.FieldViolation{{Field: "/a/0", Message: "is required"}}, te.Violations)
	require.Equal(t, "is required", registry.Violation("", "is required").Message)
	require.Equal(t, "(root)", registry.FieldName(""))
}

// What the one JSON reader refuses is one violation: a repeated key at
// its member, the rest at the root, not JSON in encoding/json's words.
func TestCheckArgsRefusesWhatTheReaderRefuses(t *testing.T) {
	t.Parallel()
	open := entry(t, `{"type":"object"}`, nil)
	limits := registry.ArgLimits{MaxBytes: 1 << 10, MaxDepth: 8}
	for args, want := range map[string]*toolwirev1.FieldViolation{
		`{"a":{"b":1,"b":2}}`: {Field: "/a/b", Message: `duplicate key "b"`},
		`{"a":`:               {Field: "", Message: "arguments are not valid JSON: unexpected end of JSON input (offset 5)"},
		"{\"a\":\"x\xff\"}":   {Field: "", Message: "arguments are refused: invalid UTF-8 in a string (offset 7)"},
		`{"a":"\ud800"}`:      {Field: "", Message: `arguments are refused: unpaired surrogate escape \ud800 in a string (offset 6)`},
		`{"a":1e1000000000}`:  {Field: "", Message: "arguments are refused: a number's exponent is beyond ±999999999 (offset 5)"},
	} {
		te := registry.CheckArgs(open, []byte(args), limits)
		require.NotNil(t, te, args)
		require.Len(t, te.Violations, 1, args)
		require.True(t, proto.Equal(want, te.Violations[0]), "%q: %v", args, te.Violations[0])
		require.Equal(t, "invalid arguments: "+registry.FieldName(want.Field)+": "+want.Message, te.Message)
	}
}

// CheckedArgs answers what CheckArgs answers and returns the parsed
// arguments when they pass; CheckArgsParsed of those answers the same.
func TestCheckedArgs(t *testing.T) {
	t.Parallel()
	ent := entry(t, `{"type":"object","properties":{"n":{"type":"integer"}}}`, nil)
	limits := registry.ArgLimits{MaxBytes: 64, MaxDepth: 4, MaxValues: 8}
	for _, args := range []string{
		`{"n":1}`, `{"n":"x"}`, `{"a":[[[[1]]]]}`, `{"a":[1,2,3,4,5,6,7,8,9]}`, `{"a":"` + strings.Repeat("x", 64) + `"}`,
		`{"n":1,"n":2}`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`, `{`, ``, `[]`,
	} {
		want := registry.CheckArgs(ent, []byte(args), limits)
		doc, te := registry.CheckedArgs(ent, []byte(args), limits)
		require.True(t, proto.Equal(want, te), "%q: %v, CheckArgs %v", args, te, want)
		if te != nil {
			require.Nil(t, doc, args)
		} else {
			require.Equal(t, args, string(doc.Raw()))
		}
		if parsed, err := jsonvalue.Parse([]byte(args)); err == nil {
			require.True(t, proto.Equal(want, registry.CheckArgsParsed(ent, parsed, limits)), args)
		}
	}
}
