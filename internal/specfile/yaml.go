package specfile

import (
	"errors"
	"fmt"
	"math"

	"go.yaml.in/yaml/v3"
)

// maxYAMLNodes bounds the nodes a document may expand to through aliases
// (a "billion laughs" document stays small on disk).
const maxYAMLNodes = 1 << 20

// decodeYAML reads the first YAML 1.2 document of b into the values
// encoding/json produces: map[string]any, []any, string, bool, nil and
// numbers. Only the YAML 1.2 core schema's booleans (true and false, also
// written True, TRUE, False, FALSE) are booleans: y, yes, on, off, no and
// the rest of YAML 1.1's words stay strings, as values and as keys. A
// mapping key is always its text, never a converted value (so key True
// stays "True", key 2 is "2"). A key repeated in one mapping is an error;
// merge keys (<<) and aliases are expanded.
func decodeYAML(b []byte) (any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	if doc.Kind == 0 {
		return nil, nil // empty document
	}
	d := yamlDecoder{}
	return d.value(&doc)
}

type yamlDecoder struct{ nodes int }

func (d *yamlDecoder) value(n *yaml.Node) (any, error) {
	if d.nodes++; d.nodes > maxYAMLNodes {
		return nil, fmt.Errorf("document expands to more than %d nodes", maxYAMLNodes)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return d.value(n.Content[0])
	case yaml.AliasNode:
		return d.value(n.Alias)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := d.value(c)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := map[string]any{}
		return out, d.mapping(n, out, false)
	case yaml.ScalarNode:
		return scalar(n)
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

// mapping adds the pairs of n to out. Explicit keys are unique and win
// over merged ones; merged is true while filling out from a merge key's
// mapping, whose keys only fill gaps.
func (d *yamlDecoder) mapping(n *yaml.Node, out map[string]any, merged bool) error {
	explicit := map[string]bool{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		for k.Kind == yaml.AliasNode {
			k = k.Alias
		}
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: a mapping key must be a scalar", k.Line)
		}
		if k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if explicit[k.Value] {
			return fmt.Errorf("line %d: key %q repeated in one mapping", k.Line, k.Value)
		}
		explicit[k.Value] = true
		if _, ok := out[k.Value]; ok && merged {
			continue
		}
		val, err := d.value(v)
		if err != nil {
			return err
		}
		out[k.Value] = val
	}
	for _, m := range merges {
		for m.Kind == yaml.AliasNode {
			m = m.Alias
		}
		sources := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			sources = m.Content
		}
		for _, src := range sources {
			for src.Kind == yaml.AliasNode {
				src = src.Alias
			}
			if src.Kind != yaml.MappingNode {
				return fmt.Errorf("line %d: a merge key needs a mapping or a list of mappings", m.Line)
			}
			if d.nodes++; d.nodes > maxYAMLNodes {
				return fmt.Errorf("document expands to more than %d nodes", maxYAMLNodes)
			}
			if err := d.mapping(src, out, true); err != nil {
				return err
			}
		}
	}
	return nil
}

var errNotJSON = errors.New("is not representable in JSON")

// scalar converts a scalar by its resolved YAML 1.2 tag.
func scalar(n *yaml.Node) (any, error) {
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return b, nil
	case "!!int", "!!float":
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		if f, ok := v.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
			return nil, fmt.Errorf("line %d: %s %w", n.Line, n.Value, errNotJSON)
		}
		return v, nil
	}
	// Strings, timestamps, binary and custom tags: the text as written.
	return n.Value, nil
}
