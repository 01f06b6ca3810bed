package profiles

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Profile is how results are rendered for one kind of client.
type Profile struct {
	// Name names the profile: in the Toolwire-Client-Profile header, logs
	// and docs. `^[a-z0-9][a-z0-9_-]{0,31}$`.
	Name string `json:"name"`
	// Match says which MCP clients get the profile; a profile without
	// match rules is reached only by its name (the header) or as the
	// default.
	Match Match `json:"match"`
	// Meta says which `_meta` keys pass to the client.
	Meta MetaRules `json:"meta"`
	// Fallbacks say what replaces content the client cannot show.
	Fallbacks Fallbacks `json:"fallbacks"`
	// Widgets writes the tool's widget meta, generated from its spec
	// (ui_template), in the client's keys: "openai" writes
	// openai/outputTemplate (ChatGPT). Empty = none.
	Widgets string `json:"widgets,omitempty"`

	// names are Match.ClientNames prepared for matching (glob), set by
	// the Set the profile is in.
	names []string
}

// Match is a profile's rules on an MCP client's declared clientInfo and
// capabilities. Every rule given must hold; a Match with no rule matches
// no client.
type Match struct {
	// ClientNames are patterns (path.Match syntax: *, ?, [...]; * matches
	// "/" too) of the clientInfo name, compared case-insensitively; one
	// must match. Empty = any name.
	ClientNames []string `json:"client_names,omitempty"`
	// Capabilities the client must all declare: a top-level capability
	// ("elicitation", "sampling", "roots") or an extension as
	// "extensions/<name>". Empty = none needed.
	Capabilities []string `json:"capabilities,omitempty"`
}

// MetaRules filter the keys of a `_meta` object (a tool's in tools/list,
// a result's and its content blocks' in tools/call). A pattern is a key
// ("openai/outputTemplate") or a namespace ("openai/*": every key that
// starts with "openai/"); "*" is every key. The protocol's and toolwire's
// own keys (io.modelcontextprotocol/*, io.toolwire/*) always pass.
type MetaRules struct {
	// Allow: when not empty, only the keys matching one pass.
	Allow []string `json:"allow,omitempty"`
	// Deny: the keys matching one never pass (Deny wins over Allow).
	Deny []string `json:"deny,omitempty"`
}

// Fallbacks say what a content block the client cannot show becomes. Each
// is "" (the block is kept as it is) or "text" (it becomes a text block
// describing it).
type Fallbacks struct {
	// Image: "text" = "[image: <mime type>, <n> bytes]".
	Image string `json:"image,omitempty"`
	// Audio: "text" = "[audio: <mime type>, <n> bytes]".
	Audio string `json:"audio,omitempty"`
	// ResourceLink: "text" = its title or name, URI and description.
	ResourceLink string `json:"resource_link,omitempty"`
	// EmbeddedResource: "text" = its text (a blob: its URI, type, size).
	EmbeddedResource string `json:"embedded_resource,omitempty"`
	// Structured: "text" = the structured content as JSON text in a text
	// block, added when the result has no text block.
	Structured string `json:"structured,omitempty"`
}

// Client is what an MCP client declared of itself.
type Client struct {
	// Name is its clientInfo name. A name longer than MaxClientName
	// bytes matches no client_names rule (Set.Match): the faces cut it
	// (ClientName) before it gets here.
	Name string
	// Capabilities are the capabilities it declared (top-level keys, and
	// "extensions/<name>" for each extension); the faces consider at
	// most MaxCapabilities of them (a client declaring more is taken to
	// declare none).
	Capabilities map[string]bool
}

// Bounds of what a client declares, as matched.
const (
	// MaxClientName is the longest clientInfo name matched, in bytes.
	MaxClientName = 256
	// MaxCapabilities is the most capability keys (top-level ones and
	// extensions each) of a client considered.
	MaxCapabilities = 64
)

// ClientName is a declared clientInfo name as matched: a name longer
// than MaxClientName bytes is cut to MaxClientName+1 bytes, which
// Set.Match treats as too long (it matches no client_names rule, only a
// profile of capability rules or the default). The faces cut a name
// with it before anything else reads it.
func ClientName(name string) string {
	if len(name) > MaxClientName {
		return name[:MaxClientName+1]
	}
	return name
}

// nameRe is the rule of a profile's name.
var nameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// Bounds of a profile.
const (
	maxRules   = 64  // patterns in one list
	maxPattern = 256 // bytes of one pattern
)

// Validate reports the first invalid field of p, naming it; the fields
// are checked in a fixed order, so the same profile gets the same error.
func (p *Profile) Validate() error {
	if !nameRe.MatchString(p.Name) {
		return fmt.Errorf("name %q must match %s", p.Name, nameRe)
	}
	lists := []struct {
		field string
		list  []string
	}{{"match.client_names", p.Match.ClientNames}, {"match.capabilities", p.Match.Capabilities},
		{"meta.allow", p.Meta.Allow}, {"meta.deny", p.Meta.Deny}}
	for _, l := range lists {
		if len(l.list) > maxRules {
			return fmt.Errorf("%s: %s has %d entries, more than %d", p.Name, l.field, len(l.list), maxRules)
		}
		for _, pat := range l.list {
			if pat == "" || len(pat) > maxPattern {
				return fmt.Errorf("%s: %s: an entry is empty or longer than %d bytes", p.Name, l.field, maxPattern)
			}
		}
	}
	for _, pat := range p.Match.ClientNames {
		if _, err := path.Match(pat, ""); err != nil {
			return fmt.Errorf("%s: match.client_names: %q: %w", p.Name, pat, err)
		}
	}
	for _, pat := range append(append([]string{}, p.Meta.Allow...), p.Meta.Deny...) {
		if i := strings.Index(pat, "*"); i >= 0 && (i != len(pat)-1 || (pat != "*" && !strings.HasSuffix(pat, "/*"))) {
			return fmt.Errorf("%s: meta: %q: a pattern is a key, a namespace (\"ns/*\") or \"*\"", p.Name, pat)
		}
	}
	fb := [][2]string{{"image", p.Fallbacks.Image}, {"audio", p.Fallbacks.Audio}, {"resource_link", p.Fallbacks.ResourceLink},
		{"embedded_resource", p.Fallbacks.EmbeddedResource}, {"structured", p.Fallbacks.Structured}}
	for _, f := range fb {
		if f[1] != "" && f[1] != "text" {
			return fmt.Errorf("%s: fallbacks.%s %.40q: want \"\" or \"text\"", p.Name, f[0], f[1])
		}
	}
	if p.Widgets != "" && p.Widgets != WidgetsOpenAI {
		return fmt.Errorf("%s: widgets %q: want \"\" or %q", p.Name, p.Widgets, WidgetsOpenAI)
	}
	return nil
}

// WidgetsOpenAI is the widget meta of ChatGPT's Apps SDK.
const WidgetsOpenAI = "openai"

// prepare makes p's names (glob of each client_names pattern).
func (p *Profile) prepare() {
	p.names = make([]string, len(p.Match.ClientNames))
	for i, pat := range p.Match.ClientNames {
		p.names[i] = glob(pat)
	}
}

// matches reports whether c is a client of p (Match); name is c.Name as
// matched (glob), "" with tooLong when c's name is longer than
// MaxClientName.
func (p *Profile) matches(c Client, name string, tooLong bool) bool {
	m := p.Match
	if len(m.ClientNames) == 0 && len(m.Capabilities) == 0 {
		return false
	}
	for _, cap := range m.Capabilities {
		if !c.Capabilities[cap] {
			return false
		}
	}
	if len(m.ClientNames) == 0 {
		return true
	}
	if tooLong {
		return false
	}
	for _, pat := range p.names {
		if ok, _ := path.Match(pat, name); ok {
			return true
		}
	}
	return false
}

// glob is a name or pattern as matched: lower-cased, and "/" (which
// path.Match's * would not cross: a client's name is no path) made a
// character like any other.
func glob(s string) string {
	return strings.ReplaceAll(strings.ToLower(s), "/", "\x00")
}

// Passes reports whether the `_meta` key passes to p's clients. An
// openai/* key (ChatGPT's) passes only to a profile that asks for them:
// one with Widgets "openai", or whose Allow names "openai/*" or an
// openai/ key (not "*"); its other rules then apply as to any key.
func (p *Profile) Passes(key string) bool {
	if strings.HasPrefix(key, "io.modelcontextprotocol/") || strings.HasPrefix(key, "io.toolwire/") {
		return true
	}
	if strings.HasPrefix(key, openAINS) && !p.wantsOpenAI() {
		return false
	}
	if anyMatch(p.Meta.Deny, key) {
		return false
	}
	return len(p.Meta.Allow) == 0 || anyMatch(p.Meta.Allow, key)
}

// openAINS is the namespace of ChatGPT's `_meta` keys.
const openAINS = "openai/"

// wantsOpenAI reports whether p's clients get openai/* keys at all.
func (p *Profile) wantsOpenAI() bool {
	if p.Widgets == WidgetsOpenAI {
		return true
	}
	for _, pat := range p.Meta.Allow {
		if strings.HasPrefix(pat, openAINS) {
			return true
		}
	}
	return false
}

func anyMatch(pats []string, key string) bool {
	for _, pat := range pats {
		switch {
		case pat == "*":
			return true
		case strings.HasSuffix(pat, "/*"):
			if strings.HasPrefix(key, strings.TrimSuffix(pat, "*")) {
				return true
			}
		case pat == key:
			return true
		}
	}
	return false
}
