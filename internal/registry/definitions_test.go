package registry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/pkg/tool"
)

// A spec's definitions are checked by Check, naming the field: bounded in
// number and size, family and mode names, a schema that compiles, no
// hidden definition that offers something, none that changes nothing.
func TestDefinitionsAreChecked(t *testing.T) {
	t.Parallel()
	check := func(defs ...tool.Definition) error {
		opts := make([]tool.Option, 0, len(defs))
		for _, d := range defs {
			opts = append(opts, tool.WithDefinition(d))
		}
		tl := tool.Must(tool.New("w", func(context.Context, struct{}) (string, error) { return "", nil }, opts...))
		return registry.Check(tl.Spec())
	}
	require.NoError(t, check())
	require.NoError(t, check(tool.Definition{Modes: []string{"voice"}, Hidden: true},
		tool.Definition{ModelFamilies: []string{"gpt", "o-series"}, Description: "short", InputSchema: `{"type":"object"}`}))
	many := make([]tool.Definition, registry.MaxDefinitions+1)
	for i := range many {
		many[i] = tool.Definition{Hidden: true}
	}
	for want, defs := range map[string][]tool.Definition{
		"definitions: 17, at most 16":        many,
		"definitions[0].model_families":      {{ModelFamilies: []string{"gpt 5"}, Hidden: true}},
		"definitions[0].modes":               {{Modes: []string{""}, Hidden: true}},
		"definitions[1].description":         {{Hidden: true}, {Description: strings.Repeat("d", registry.MaxDefinitionDescription+1)}},
		"definitions[0].input_schema":        {{InputSchema: `{"type":`}},
		"a hidden definition offers nothing": {{Hidden: true, Description: "x"}},
		"changes nothing":                    {{Modes: []string{"plan"}}},
		"at most 32 model families":          {{ModelFamilies: make([]string, 33), Hidden: true}},
	} {
		require.ErrorContains(t, check(defs...), want)
	}
}

// Definition picks the first definition whose families and modes match;
// an empty list matches any request, a listed one never a request
// without a model or a mode.
func TestDefinitionPicksTheFirstMatch(t *testing.T) {
	t.Parallel()
	tl := tool.Must(tool.New("w", func(context.Context, struct{}) (string, error) { return "", nil },
		tool.WithDefinition(tool.Definition{Modes: []string{"voice"}, Hidden: true}),
		tool.WithDefinition(tool.Definition{ModelFamilies: []string{"gpt"}, Description: "for gpt"})))
	for _, c := range []struct {
		family, mode string
		want         int
	}{{"", "", -1}, {"gpt", "", 1}, {"gpt", "voice", 0}, {"", "voice", 0}, {"claude", "plan", -1}, {"gpt", "plan", 1}} {
		_, i := registry.Definition(tl.Spec(), c.family, c.mode)
		require.Equal(t, c.want, i, "%+v", c)
	}
	def, _ := registry.Definition(tl.Spec(), "gpt", "")
	v := registry.DefinedView(tl.Spec(), def)
	require.Equal(t, "for gpt", v.Summary)
	require.NotEqual(t, "for gpt", tl.Spec().Summary, "the registered spec is not changed")
}
