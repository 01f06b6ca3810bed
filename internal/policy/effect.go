package policy

import "fmt"

// Effect is what a rule or a layer default says about a call, and what a
// Decision answers. Effects are ordered by restrictiveness: Allow < Ask <
// Deny, so the most restrictive of several is their maximum. The zero
// value means "no effect" (a layer without a default).
type Effect uint8

// The effects, least restrictive first.
const (
	Allow Effect = iota + 1
	Ask
	Deny
)

// String returns "allow", "ask" or "deny" ("none" for the zero value).
func (e Effect) String() string {
	switch e {
	case Allow:
		return "allow"
	case Ask:
		return "ask"
	case Deny:
		return "deny"
	}
	return "none"
}

// ParseEffect returns the effect named s ("allow", "ask" or "deny",
// lower case only) and whether s named one.
func ParseEffect(s string) (Effect, bool) {
	switch s {
	case "allow":
		return Allow, true
	case "ask":
		return Ask, true
	case "deny":
		return Deny, true
	}
	return 0, false
}

// Layer is where a rule, a default or a grant lives. The policy document
// holds the tenant layer and the agent layers; grants (made by approvers)
// live in the session, agent or tenant layer.
type Layer uint8

// The layers, from the widest to the narrowest.
const (
	LayerTenant Layer = iota + 1
	LayerAgent
	LayerSession
	// LayerMode is a mode's layer of the document (modes:), which applies
	// to the calls of sessions in that mode. Grants never live in it.
	LayerMode
)

// String returns "tenant", "agent" or "session" ("none" for the zero value).
func (l Layer) String() string {
	switch l {
	case LayerTenant:
		return "tenant"
	case LayerAgent:
		return "agent"
	case LayerSession:
		return "session"
	case LayerMode:
		return "mode"
	}
	return "none"
}

// ParseLayer returns the layer named s ("tenant", "agent" or "session")
// and whether s named one.
func ParseLayer(s string) (Layer, bool) {
	switch s {
	case "tenant":
		return LayerTenant, true
	case "agent":
		return LayerAgent, true
	case "session":
		return LayerSession, true
	case "mode":
		return LayerMode, true
	}
	return 0, false
}

// MarshalText writes the effect's name.
func (e Effect) MarshalText() ([]byte, error) {
	if e < Allow || e > Deny {
		return nil, fmt.Errorf("policy: no effect %d", e)
	}
	return []byte(e.String()), nil
}

// UnmarshalText reads an effect's name.
func (e *Effect) UnmarshalText(b []byte) error {
	v, ok := ParseEffect(string(b))
	if !ok {
		return fmt.Errorf("policy: effect must be allow, ask or deny, not %q", b)
	}
	*e = v
	return nil
}

// MarshalText writes the layer's name.
func (l Layer) MarshalText() ([]byte, error) {
	if l < LayerTenant || l > LayerMode {
		return nil, fmt.Errorf("policy: no layer %d", l)
	}
	return []byte(l.String()), nil
}

// UnmarshalText reads a layer's name.
func (l *Layer) UnmarshalText(b []byte) error {
	v, ok := ParseLayer(string(b))
	if !ok {
		return fmt.Errorf("policy: layer must be session, agent or tenant, not %q", b)
	}
	*l = v
	return nil
}
