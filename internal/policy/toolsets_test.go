package policy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

const toolsetsDoc = `
tenant:
  default: allow
  rules:
    - id: gpt-no-shell
      effect: deny
      tools: [shell]
      when: caller.model_family == "gpt"
      reason: not for gpt
model_families:
  - {family: gpt, models: ["gpt-*", "o[0-9]*"]}
toolsets:
  gpt:
    hide: [grep_*]
    substitute: {edit: apply_patch}
    variants:
      apply_patch:
        input_schema: {type: object, required: [patch], properties: {patch: {type: string, maxLength: 100}}, additionalProperties: false}
  claude:
    hide: [apply_patch]
tests:
  - {tool: shell, caller: {model: o3-mini}, expect: deny}
  - {tool: shell, caller: {model: claude-sonnet-4-5}, expect: allow}
`

// A model's family comes from model_families (first match), else the
// default; a family's toolset hides, substitutes and offers variants;
// CEL sees caller.model_family; the document's tests derive the family.
func TestToolsets(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse([]byte(toolsetsDoc))
	require.NoError(t, err)
	require.NoError(t, p.RunTests(nil))
	require.Equal(t, []string{"claude", "gpt"}, p.Toolsets())

	require.Equal(t, "gpt", p.ModelFamily("o3-mini"))
	require.Equal(t, "gpt", p.ModelFamily("gpt-5.1"))
	require.Equal(t, "claude", p.ModelFamily("claude-sonnet-4-5"))
	require.Equal(t, "gemini", p.ModelFamily("models/gemini-2.5-pro"))
	require.Equal(t, "", p.ModelFamily(""))
	require.Equal(t, "o", policy.DefaultModelFamily("o3"), "without a mapping, o3's family is its leading letters")

	gpt, claude := p.Toolset("gpt"), p.Toolset("claude")
	require.Nil(t, p.Toolset("gemini"))
	ok, why := gpt.Offered("edit")
	require.False(t, ok)
	require.Contains(t, why, "toolset gpt offers apply_patch instead")
	ok, why = gpt.Offered("grep_files")
	require.False(t, ok)
	require.Contains(t, why, "hidden by toolset gpt")
	ok, _ = gpt.Offered("apply_patch")
	require.True(t, ok)
	require.Equal(t, "edit", gpt.Replaces("apply_patch"))
	ok, _ = claude.Offered("edit")
	require.True(t, ok)
	ok, _ = claude.Offered("apply_patch")
	require.False(t, ok)

	spec := &toolwirev1.ToolSpec{Name: "apply_patch", InputSchemaJson: `{"type":"object"}`}
	v := gpt.View(spec)
	require.NotSame(t, spec, v)
	require.Contains(t, v.InputSchemaJson, `"maxLength":100`)
	require.Equal(t, `{"type":"object"}`, spec.InputSchemaJson, "the registry's spec is not changed")
	require.Same(t, spec, claude.View(spec))
	require.NotNil(t, gpt.Variant("apply_patch").InputSchema())

	d := p.Decide(policy.Input{Tool: &toolwirev1.ToolSpec{Name: "shell"}, Caller: &toolwirev1.Caller{Model: "gpt-5.1", ModelFamily: "gpt"}})
	require.Equal(t, policy.Deny, d.Outcome, "CEL reads caller.model_family")
	d = p.Decide(policy.Input{Tool: &toolwirev1.ToolSpec{Name: "shell"}, Caller: &toolwirev1.Caller{Model: "claude-opus-4", ModelFamily: "claude"}})
	require.Equal(t, policy.Allow, d.Outcome)
}

// A toolset that cannot be applied is refused with the field named.
func TestToolsetsRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ doc, want string }{
		{"toolsets:\n  gpt: {substitute: {edit: edit}}\n", "must map a tool to another tool"},
		{"toolsets:\n  gpt: {hide: [apply_patch], substitute: {edit: apply_patch}}\n", "apply_patch is hidden by the toolset"},
		{"toolsets:\n  gpt: {substitute: {edit: apply_patch}, variants: {edit: {input_schema: {type: object}}}}\n", "a variant of it is never offered"},
		{"toolsets:\n  gpt: {variants: {x: {input_schema: {type: 3}}}}\n", "toolsets.gpt.variants.x.input_schema"},
		{"toolsets:\n  gpt: {hide: [x], colour: red}\n", "toolsets.gpt.colour"},
		{"toolsets:\n  \"no spaces\": {}\n", "is not a family name"},
		{"model_families:\n  - {family: gpt}\n", "model_families[0].models"},
		{"model_families:\n  - {family: \"\", models: [\"gpt-*\"]}\n", "model_families[0].family: \"\" is not a family name"},
		{"model_families:\n  - {models: [\"gpt-*\"]}\n", "model_families[0].family"},
		{"toolsets:\n  gpt: {substitute: {a: b, b: c}}\n", "either substituted or offered instead"},
		{"toolsets:\n  gpt: {substitute: {edit: a, edit: b}}\n", "toolsets.gpt.substitute.edit: is given twice"},
		{"toolsets:\n  gpt: {variants: {x: {input_schema: {type: object}}, x: {input_schema: {type: object}}}}\n", "toolsets.gpt.variants.x: is given twice"},
	} {
		_, err := policy.Parse([]byte(c.doc))
		require.ErrorContains(t, err, c.want, c.doc)
	}
}

// The sections are part of the version: a changed toolset is another
// document; one without them keeps its version.
func TestToolsetsInVersion(t *testing.T) {
	t.Parallel()
	a, err := policy.Parse([]byte(toolsetsDoc))
	require.NoError(t, err)
	b, err := policy.Parse([]byte(strings.Replace(toolsetsDoc, "maxLength: 100", "maxLength: 101", 1)))
	require.NoError(t, err)
	require.NotEqual(t, a.Version(), b.Version())
	require.Contains(t, string(a.Canonical()), `"toolsets":`)
	require.Contains(t, string(a.Canonical()), `"model_families":`)
	plain, err := policy.Parse([]byte("tenant: {default: allow}\n"))
	require.NoError(t, err)
	require.NotContains(t, string(plain.Canonical()), "toolsets")
}

// The sections' entry counts are capped at parse time; at the caps a
// document parses.
func TestToolsetsBounded(t *testing.T) {
	t.Parallel()
	families := func(n, globs int) string {
		var b strings.Builder
		b.WriteString("model_families:\n")
		for i := range n {
			fmt.Fprintf(&b, "  - {family: f%d, models: [", i)
			for j := range globs {
				if j > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "m%d-%d", i, j)
			}
			b.WriteString("]}\n")
		}
		return b.String()
	}
	toolsets := func(n int) string {
		var b strings.Builder
		b.WriteString("toolsets:\n")
		for i := range n {
			fmt.Fprintf(&b, "  f%d: {hide: [x]}\n", i)
		}
		return b.String()
	}
	entries := func(section string, n int) string {
		var b strings.Builder
		b.WriteString("toolsets:\n  gpt:\n    " + section + ":")
		for i := range n {
			switch section {
			case "hide":
				fmt.Fprintf(&b, "\n      - h%d", i)
			case "substitute":
				fmt.Fprintf(&b, "\n      s%d: t%d", i, i)
			case "variants":
				fmt.Fprintf(&b, "\n      v%d: {input_schema: {type: object}}", i)
			}
		}
		return b.String() + "\n"
	}
	for _, c := range []struct{ ok, over, want string }{
		{families(policy.MaxModelFamilies, 1), families(policy.MaxModelFamilies+1, 1), "model_families: has 65 entries, more than 64"},
		{families(1, policy.MaxToolsetEntries), families(1, policy.MaxToolsetEntries+1), "model_families[0].models: has 257 entries, more than 256"},
		{toolsets(policy.MaxModelFamilies), toolsets(policy.MaxModelFamilies + 1), "toolsets: has 65 entries, more than 64"},
		{entries("hide", policy.MaxToolsetEntries), entries("hide", policy.MaxToolsetEntries+1), "toolsets.gpt.hide: has 257 entries"},
		{entries("substitute", policy.MaxToolsetEntries), entries("substitute", policy.MaxToolsetEntries+1), "toolsets.gpt.substitute: has 257 entries"},
		{entries("variants", policy.MaxToolsetEntries), entries("variants", policy.MaxToolsetEntries+1), "toolsets.gpt.variants: has 257 entries"},
	} {
		_, err := policy.Parse([]byte(c.ok))
		require.NoError(t, err, c.want)
		_, err = policy.Parse([]byte(c.over))
		require.ErrorContains(t, err, c.want)
	}
}
