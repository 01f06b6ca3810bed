package profiles

import (
	"errors"
	"fmt"
	"io"
	"os"

	"sigs.k8s.io/yaml"
)

// Header names the profile of a request's answers, on the MCP endpoint
// and the Connect API alike: a configured profile's name.
const Header = "Toolwire-Client-Profile"

// Names of the shipped profiles.
const (
	ChatGPT = "chatgpt"
	Claude  = "claude"
	VSCode  = "vscode"
	Cursor  = "cursor"
	Plain   = "plain"
)

// Bounds of a profiles file.
const (
	MaxFileBytes = 256 << 10
	maxProfiles  = 64
)

// Set is the profiles an endpoint renders with, in match order, and the
// default one. A Set is never changed once made: it is safe for
// concurrent use.
type Set struct {
	list []*Profile
	def  *Profile
}

// File is a profiles file (docs/mcp.md, "Client profiles").
type File struct {
	// Profiles are tried in order before the shipped ones; one named as a
	// shipped profile replaces it.
	Profiles []Profile `json:"profiles"`
	// Default is the profile of a client no profile matches; empty =
	// "plain".
	Default string `json:"default,omitempty"`
}

// Shipped is the set of the shipped profiles, "plain" the default.
func Shipped() *Set {
	s, err := build(File{})
	if err != nil {
		panic("profiles: the shipped profiles are invalid: " + err.Error()) // a test proves they are not
	}
	return s
}

// shipped are the profiles toolwire ships, in match order.
func shipped() []Profile {
	noOpenAI := MetaRules{Deny: []string{"openai/*"}}
	return []Profile{
		{Name: ChatGPT, Match: Match{ClientNames: []string{"openai-mcp", "chatgpt*", "openai*"}}, Widgets: WidgetsOpenAI},
		{Name: Claude, Match: Match{ClientNames: []string{"claude*"}}, Meta: noOpenAI,
			Fallbacks: Fallbacks{Structured: "text"}},
		{Name: VSCode, Match: Match{ClientNames: []string{"visual studio code*", "vscode*", "*copilot*"}}, Meta: noOpenAI},
		{Name: Cursor, Match: Match{ClientNames: []string{"cursor*"}}, Meta: noOpenAI,
			Fallbacks: Fallbacks{Audio: "text", ResourceLink: "text"}},
		{Name: Plain, Meta: noOpenAI},
	}
}

// Parse reads a profiles file: YAML or JSON, at most MaxFileBytes, unknown
// keys refused, every profile valid, names unique.
func Parse(b []byte) (*Set, error) {
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("profiles: the file is larger than %d bytes", MaxFileBytes)
	}
	var f File
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	return build(f)
}

// Load reads the profiles file at path (Parse).
func Load(path string) (*Set, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	defer fh.Close()
	// One byte over the bound, so that Parse refuses an oversized file.
	b, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("profiles: %s: %w", path, err)
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return s, nil
}

// build is f's profiles, then the shipped ones f does not replace.
func build(f File) (*Set, error) {
	if len(f.Profiles) > maxProfiles {
		return nil, fmt.Errorf("profiles: %d profiles, more than %d", len(f.Profiles), maxProfiles)
	}
	s := &Set{}
	seen := map[string]bool{}
	for i := range f.Profiles {
		p := f.Profiles[i]
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("profiles: profiles[%d]: %w", i, err)
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("profiles: profiles[%d]: %q is named twice", i, p.Name)
		}
		seen[p.Name] = true
		p.prepare()
		s.list = append(s.list, &p)
	}
	for _, p := range shipped() {
		if !seen[p.Name] {
			if err := p.Validate(); err != nil {
				return nil, err
			}
			p.prepare()
			s.list = append(s.list, &p)
		}
	}
	def := f.Default
	if def == "" {
		def = Plain
	}
	var ok bool
	if s.def, ok = s.Named(def); !ok {
		return nil, fmt.Errorf("profiles: default %q names no profile", def)
	}
	return s, nil
}

// Named is the profile called name.
func (s *Set) Named(name string) (*Profile, bool) {
	for _, p := range s.list {
		if p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// Default is the profile of a client no profile matches.
func (s *Set) Default() *Profile { return s.def }

// Match is the profile of the client c: the first, in the set's order,
// whose Match rules c meets; the default when none does. A name longer
// than MaxClientName matches no client_names rule. The name is prepared
// (glob) once, not per profile.
func (s *Set) Match(c Client) *Profile {
	tooLong := len(c.Name) > MaxClientName
	name := ""
	if !tooLong {
		name = glob(c.Name)
	}
	for _, p := range s.list {
		if p.matches(c, name, tooLong) {
			return p
		}
	}
	return s.def
}

// Names are the profiles' names, in match order.
func (s *Set) Names() []string {
	out := make([]string, len(s.list))
	for i, p := range s.list {
		out[i] = p.Name
	}
	return out
}

// ErrUnknown is returned by Select for a name that is no profile.
var ErrUnknown = errors.New("profiles: no such profile")

// Select is the profile called name ("" = none: nil), ErrUnknown when the
// set has none of that name.
func (s *Set) Select(name string) (*Profile, error) {
	if name == "" {
		return nil, nil
	}
	if p, ok := s.Named(name); ok {
		return p, nil
	}
	if len(name) > 32 { // no profile's name is longer: the header's value is not echoed whole
		name = name[:32] + "..."
	}
	// The configured names are not listed: they are the operator's, and
	// the caller may be any tenant's.
	return nil, fmt.Errorf("%w %q", ErrUnknown, name)
}
