package skills

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// frontMatter is what toolwire reads of SKILL.md's front matter: name
// and description, and the whole mapping as JSON, which MCP's Skills
// extension lists (Skill.frontmatter). The common format has more
// optional fields (license, compatibility, metadata, allowed-tools, …);
// they are listed and kept in the file, which the model reads whole,
// and not interpreted: a skill does not grant itself tools, the policy
// does.
type frontMatter struct {
	name, description string
	json              string
}

// parseSkillFile splits SKILL.md into its front matter (between a first
// line `---` and the next line `---`, at most MaxFrontMatterBytes) and
// its instructions, and reads the front matter's name and description.
// The file's size is bounded by the caller (MaxFileBytes).
func parseSkillFile(b []byte) (frontMatter, string, error) {
	if !utf8.Valid(b) {
		return frontMatter{}, "", errors.New("not valid UTF-8")
	}
	rest, ok := cutLine(b, "---")
	if !ok {
		return frontMatter{}, "", errors.New("no front matter: the file must start with a line ---")
	}
	for off := 0; off <= MaxFrontMatterBytes; {
		line, next := rest[off:], len(rest)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line, next = line[:i], off+i+1
		}
		if string(bytes.TrimRight(line, "\r")) == "---" {
			fm, err := readFrontMatter(rest[:off])
			if err != nil {
				return frontMatter{}, "", fmt.Errorf("front matter: %w", err)
			}
			return fm, string(bytes.TrimLeft(rest[next:], "\r\n")), nil
		}
		if next >= len(rest) {
			break
		}
		off = next
	}
	return frontMatter{}, "", fmt.Errorf("front matter: no closing line --- within %d bytes", MaxFrontMatterBytes)
}

// cutLine returns what follows b's first line if that line is want.
func cutLine(b []byte, want string) ([]byte, bool) {
	line, rest, found := bytes.Cut(b, []byte("\n"))
	if !found || string(bytes.TrimRight(line, "\r")) != want {
		return nil, false
	}
	return rest, true
}

// readFrontMatter reads name and description from the YAML text y (its
// top-level mapping), and the whole mapping as JSON (frontMatterJSON).
func readFrontMatter(y []byte) (frontMatter, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(y, &doc); err != nil {
		return frontMatter{}, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return frontMatter{}, errors.New("not a mapping")
	}
	var fm frontMatter
	seen := map[string]bool{}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode || (k.Value != "name" && k.Value != "description") {
			continue
		}
		if seen[k.Value] {
			return frontMatter{}, fmt.Errorf("%s given twice", k.Value)
		}
		seen[k.Value] = true
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			return frontMatter{}, fmt.Errorf("%s is not a string", k.Value)
		}
		if k.Value == "name" {
			fm.name = v.Value
		} else {
			fm.description = v.Value
		}
	}
	if fm.name == "" || fm.description == "" {
		return frontMatter{}, errors.New("name and description are required")
	}
	var err error
	if fm.json, err = frontMatterJSON(doc.Content[0], fm); err != nil {
		return frontMatter{}, err
	}
	return fm, nil
}

// frontMatterJSON is the mapping m as a JSON object, at most
// MaxFrontMatterBytes, with name and description as fm read them
// (strings, as the manifest has them). Each value is written as the
// YAML text gives it (jsonOf): numbers, booleans and null as JSON's,
// other scalars (dates, .nan) as strings, mapping keys as strings.
// Aliases are followed, at most maxFrontMatterNodes nodes in all, so an
// alias bomb is refused rather than expanded.
func frontMatterJSON(m *yaml.Node, fm frontMatter) (string, error) {
	budget := maxFrontMatterNodes
	v, err := jsonOf(m, &budget, 0)
	if err != nil {
		return "", err
	}
	obj := v.(map[string]any)
	obj["name"], obj["description"] = fm.name, fm.description
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return "", fmt.Errorf("not representable as JSON: %w", err)
	}
	out := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	if len(out) > MaxFrontMatterBytes {
		return "", fmt.Errorf("%d bytes as JSON, more than %d", len(out), MaxFrontMatterBytes)
	}
	return string(out), nil
}

// maxFrontMatterNodes bounds the YAML nodes jsonOf visits, aliases
// followed: a 16 KiB front matter has far fewer.
const maxFrontMatterNodes = 10_000

// jsonOf is the YAML node n as a JSON value: a mapping an object (keys as
// their text), a sequence an array, an int, float, bool or null scalar
// JSON's (NaN and the infinities as their text), every other scalar its
// text.
func jsonOf(n *yaml.Node, budget *int, depth int) (any, error) {
	if *budget--; *budget < 0 || depth > 64 {
		return nil, errors.New("front matter too large or too deep once its aliases are followed")
	}
	switch n.Kind {
	case yaml.AliasNode:
		return jsonOf(n.Alias, budget, depth+1)
	case yaml.MappingNode:
		obj := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, err := jsonOf(n.Content[i], budget, depth+1)
			if err != nil {
				return nil, err
			}
			v, err := jsonOf(n.Content[i+1], budget, depth+1)
			if err != nil {
				return nil, err
			}
			obj[fmt.Sprint(k)] = v
		}
		return obj, nil
	case yaml.SequenceNode:
		arr := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := jsonOf(c, budget, depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		return arr, nil
	case yaml.ScalarNode:
		return scalarOf(n), nil
	}
	return nil, fmt.Errorf("unexpected YAML node kind %d", n.Kind)
}

// scalarOf is a scalar node as JSON: its decoded value for an int, a
// finite float, a bool or null, else its text.
func scalarOf(n *yaml.Node) any {
	switch n.ShortTag() {
	case "!!int", "!!float", "!!bool", "!!null":
		var v any
		if n.Decode(&v) == nil {
			if f, ok := v.(float64); !ok || !(math.IsNaN(f) || math.IsInf(f, 0)) {
				return v
			}
		}
	}
	return n.Value
}

// CheckFrontMatter checks a manifest's front matter fm (Skill.frontmatter)
// against its name and description: empty (a worker older than the
// field), or a JSON object of at most MaxFrontMatterBytes whose name and
// description are the manifest's.
func CheckFrontMatter(fm, name, description string) error {
	if fm == "" {
		return nil
	}
	if len(fm) > MaxFrontMatterBytes {
		return fmt.Errorf("front matter of %d bytes, more than %d", len(fm), MaxFrontMatterBytes)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(fm), &v); err != nil || v == nil {
		return errors.New("front matter is not a JSON object")
	}
	if v["name"] != name || v["description"] != description {
		return errors.New("front matter's name and description are not the manifest's")
	}
	return nil
}
