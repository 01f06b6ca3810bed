package skills

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// frontMatter is what toolwire reads of SKILL.md's front matter. The
// common format has more optional fields (license, compatibility,
// metadata, allowed-tools, …); they are kept in the file, which the
// model reads whole, and not interpreted: a skill does not grant itself
// tools, the policy does.
type frontMatter struct {
	name, description string
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
// top-level mapping; other keys are not decoded, so their aliases are
// never expanded).
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
	return fm, nil
}
