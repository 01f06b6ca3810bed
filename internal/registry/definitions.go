package registry

import (
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Bounds of a spec's definitions (ToolSpec.definitions): every list and
// every call of a tool scans them.
const (
	MaxDefinitions           = 16
	MaxDefinitionSelectors   = 32   // families, and modes, of one definition
	MaxDefinitionDescription = 4096 // bytes
)

// Definition returns the definition of spec that a request of model
// family ("" = no model) in a session of mode ("" = none) is offered:
// the first whose families and modes both match (an empty list matches
// anything), and its index; nil and -1 when none does (the tool as
// registered).
func Definition(spec *toolwirev1.ToolSpec, family, mode string) (*toolwirev1.ToolDefinition, int) {
	for i, d := range spec.GetDefinitions() {
		if matches(d.GetModelFamilies(), family) && matches(d.GetModes(), mode) {
			return d, i
		}
	}
	return nil, -1
}

// matches reports whether v is among the selectors (any v, "" too, when
// there are none; never "" otherwise).
func matches(selectors []string, v string) bool {
	return len(selectors) == 0 || (v != "" && slices.Contains(selectors, v))
}

// DefinedView returns spec as definition def shows it: its description as
// the summary and description, its input schema as the tool's (a copy;
// spec is not changed). def nil or without either is spec itself. The
// version stays the registered spec's: a definition is applied on top of
// that spec, never registered itself.
func DefinedView(spec *toolwirev1.ToolSpec, def *toolwirev1.ToolDefinition) *toolwirev1.ToolSpec {
	if def.GetDescription() == "" && def.GetInputSchemaJson() == "" {
		return spec
	}
	c := proto.CloneOf(spec)
	if s := def.GetDescription(); s != "" {
		c.Summary, c.Description = s, s
	}
	if s := def.GetInputSchemaJson(); s != "" {
		c.InputSchemaJson = s
	}
	return c
}

// DefinitionRefusal is what a call of a tool that def hides is told.
func DefinitionRefusal(tool, family, mode string, index int) string {
	whom := ""
	switch {
	case family != "" && mode != "":
		whom = fmt.Sprintf(" to model family %s in mode %q", family, mode)
	case family != "":
		whom = " to model family " + family
	case mode != "":
		whom = fmt.Sprintf(" in mode %q", mode)
	}
	return fmt.Sprintf("tool %s is not offered%s (its spec's definitions[%d] hides it)", tool, whom, index)
}

// checkDefinitions checks a spec's definitions: bounded, family and mode
// names the policy's rule (policy.ModeNameRE, which family names follow
// too), a bounded description, and a schema that compiles. A definition
// that changes nothing is refused: it would hide the definitions after it
// from its families and modes for no reason a reader sees.
func checkDefinitions(spec *toolwirev1.ToolSpec) error {
	defs := spec.GetDefinitions()
	if len(defs) > MaxDefinitions {
		return fmt.Errorf("definitions: %d, at most %d", len(defs), MaxDefinitions)
	}
	var errs []error
	for i, d := range defs {
		field := fmt.Sprintf("definitions[%d]", i)
		if len(d.GetModelFamilies()) > MaxDefinitionSelectors || len(d.GetModes()) > MaxDefinitionSelectors {
			errs = append(errs, fmt.Errorf("%s: at most %d model families and %d modes", field, MaxDefinitionSelectors, MaxDefinitionSelectors))
			continue
		}
		for _, f := range d.GetModelFamilies() {
			if !policy.ModeNameRE.MatchString(f) {
				errs = append(errs, fmt.Errorf("%s.model_families: %.80q is not a family name (letters, digits and _ -, starting with a letter, at most 64)", field, f))
			}
		}
		for _, m := range d.GetModes() {
			if !policy.ModeNameRE.MatchString(m) {
				errs = append(errs, fmt.Errorf("%s.modes: %.80q is not a mode name (letters, digits and _ -, starting with a letter, at most 64)", field, m))
			}
		}
		if len(d.GetDescription()) > MaxDefinitionDescription {
			errs = append(errs, fmt.Errorf("%s.description: %d bytes, at most %d", field, len(d.GetDescription()), MaxDefinitionDescription))
		}
		if s := d.GetInputSchemaJson(); s != "" {
			if _, err := DefaultSchemas.Compile(s); err != nil {
				errs = append(errs, fmt.Errorf("%s.input_schema: %w", field, err))
			}
		}
		if d.GetHidden() && (d.GetDescription() != "" || d.GetInputSchemaJson() != "") {
			errs = append(errs, fmt.Errorf("%s: a hidden definition offers nothing: no description or input schema", field))
		}
		if !d.GetHidden() && d.GetDescription() == "" && d.GetInputSchemaJson() == "" {
			errs = append(errs, fmt.Errorf("%s: changes nothing (neither hidden nor a description or an input schema)", field))
		}
	}
	return errors.Join(errs...)
}
