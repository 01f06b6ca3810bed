package policy

import (
	"fmt"
	"strings"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"go.yaml.in/yaml/v3"
)

// Session rules of a document (doc.go, "Session rules"): what a call's
// session must be for the tenant's calls to be admitted. Without them an
// agent whose session an orchestrator restricted (a mode) or ended could
// leave the session out of its calls, or name a fresh one nobody opened,
// and run unrestricted: a session is named by the caller, never bound to
// its credentials.
//
//	sessions:
//	  required: true        # a call naming no session is refused (PERMISSION_DENIED)
//	  opened_only: true     # a call may name only a session an orchestrator opened (else SESSION_INACTIVE)
//	  default_mode: voice   # a mode of modes:, for calls whose session has none (and calls without a session)
//
// Like loop_guard and latency_budgets the section is the document's own,
// beside its layers; every field is optional and off when left out.
// Unknown fields are refused.

// SessionRules is the compiled `sessions:` section. The zero value (no
// section) is what a document without one has: sessions optional, any
// session name admitted, no default mode.
type SessionRules struct {
	// Required: a call must name a session.
	Required bool
	// OpenedOnly: a call may name only a session that exists in the
	// sessions bucket (opened by SetSessionMode, written by the reference
	// intent applier, or ended).
	OpenedOnly bool
	// DefaultMode is the mode of a call whose session has none, and of a
	// call without a session; "" = none. It is a mode the document
	// declares.
	DefaultMode string
}

// IsZero reports whether r restricts nothing (no section, or every field
// off).
func (r SessionRules) IsZero() bool { return r == SessionRules{} }

// ModeOf is the mode a call is decided in when its session's mode is
// sessionMode ("" = the session has none, or the call names no session):
// the session's own mode, else DefaultMode.
func (r SessionRules) ModeOf(sessionMode string) string {
	if sessionMode != "" {
		return sessionMode
	}
	return r.DefaultMode
}

// String renders r for people (`policy explain`): "required, opened_only,
// default_mode voice", or "none".
func (r SessionRules) String() string {
	var parts []string
	if r.Required {
		parts = append(parts, "required")
	}
	if r.OpenedOnly {
		parts = append(parts, "opened_only")
	}
	if r.DefaultMode != "" {
		parts = append(parts, "default_mode "+r.DefaultMode)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// Sessions returns the session rules of p (the zero SessionRules for a
// nil p or a document without the section).
func (p *Policy) Sessions() SessionRules {
	if p == nil {
		return SessionRules{}
	}
	return p.sessions
}

// docSessions is the decoded section. Each field keeps its line, so that
// a compile error can name it; a new field is one more entry here, in
// sessionsFields and in compileSessions.
type docSessions struct {
	line        int
	required    bool
	openedOnly  bool
	defaultMode string
	modeLine    int
}

func (d decoder) sessions(n *yaml.Node) *docSessions {
	s := &docSessions{line: n.Line}
	const f = "sessions"
	d.mapping(n, f, map[string]func(k, v *yaml.Node){
		"required":    func(_, v *yaml.Node) { s.required, _ = d.boolean(v, f+".required") },
		"opened_only": func(_, v *yaml.Node) { s.openedOnly, _ = d.boolean(v, f+".opened_only") },
		"default_mode": func(_, v *yaml.Node) {
			s.modeLine = v.Line
			if m, ok := d.str(v, f+".default_mode"); ok {
				if !ModeNameRE.MatchString(m) {
					d.ps.add(v.Line, f+".default_mode", "%q is not a mode name (letters, digits and _ -, starting with a letter, at most 64)", m)
					return
				}
				s.defaultMode = m
			}
		},
	}, nil)
	return s
}

// compileSessions checks the section against the document's modes: a
// default mode is one of them.
func compileSessions(ds *docSessions, modes map[string]*layer, ps *problems) SessionRules {
	if ds == nil {
		return SessionRules{}
	}
	r := SessionRules{Required: ds.required, OpenedOnly: ds.openedOnly, DefaultMode: ds.defaultMode}
	if m := ds.defaultMode; m != "" {
		if _, ok := modes[m]; !ok {
			ps.add(ds.modeLine, "sessions.default_mode", "mode %q is not declared under modes: (declare it, e.g. `modes: {%s: {}}`)", m, m)
		}
	}
	return r
}

// canonicalSessions renders the section for the canonical form: the
// fields that are on (nil when none is).
func canonicalSessions(ds *docSessions) map[string]any {
	if ds == nil {
		return nil
	}
	c := map[string]any{}
	if ds.required {
		c["required"] = true
	}
	if ds.openedOnly {
		c["opened_only"] = true
	}
	if ds.defaultMode != "" {
		c["default_mode"] = ds.defaultMode
	}
	if len(c) == 0 {
		return nil
	}
	return c
}

// Explain says how r applies to a call in session ("" = none) decided in
// mode, defaulted when mode is DefaultMode applied because the call named
// none, for `policy explain`; "" when r restricts nothing. The session
// itself is not read: whether it was opened is the dispatcher's to know.
func (r SessionRules) Explain(session, mode string, defaulted bool) string {
	if r.IsZero() {
		return ""
	}
	s := r.String()
	switch {
	case r.Required && session == "":
		s += "; this call names no session: admission refuses it PERMISSION_DENIED (sessions.required) before the rules decide"
	case r.OpenedOnly && session != "":
		s += fmt.Sprintf("; admission refuses it SESSION_INACTIVE unless session %q was opened", session)
	}
	if defaulted {
		s += fmt.Sprintf("; decided in mode %s (sessions.default_mode: no mode was given)", mode)
	}
	return s
}

// Session settings of a layer (doc.go): what the dispatcher does with
// the sessions of the calls the layer applies to — beside the document's
// own sessions: section above, which says what a call's session must be.
//
//	tenant:
//	  sessions:
//	    pin_versions: true   # default false
//	modes:
//	  voice:
//	    sessions: {pin_versions: true}
//
// pin_versions: the first call of a session pins the spec version it
// resolves for its tool, and the session's later calls of that tool run
// that version (internal/dispatch, admit_lookup.go). The layers compose
// like their rules, the stricter wins: pinning is on for a call when any
// layer that applies to it (the tenant's, the caller's agent's, the
// caller's mode's) turns it on; false is the same as leaving it out, so no
// layer can turn off what another turned on.

// layerSessions is a layer's sessions: section.
type layerSessions struct {
	pinVersions bool
}

func (d decoder) layerSessions(n *yaml.Node, field string) layerSessions {
	var s layerSessions
	d.mapping(n, field, map[string]func(k, v *yaml.Node){
		"pin_versions": func(_, v *yaml.Node) { s.pinVersions, _ = d.boolean(v, field+".pin_versions") },
	}, nil)
	return s
}

// canonical renders the section for the canonical form (nil = the
// defaults, left out).
func (s layerSessions) canonical() map[string]any {
	if !s.pinVersions {
		return nil
	}
	return map[string]any{"pin_versions": true}
}

// PinsVersions reports whether the policy pins spec versions per session
// for caller's calls: some layer that applies to caller (the tenant's,
// its agent's, its mode's: caller.mode) says sessions.pin_versions. A nil
// policy pins nothing.
func (p *Policy) PinsVersions(caller *toolwirev1.Caller) bool {
	if p == nil {
		return false
	}
	for _, l := range p.layersFor(caller) {
		if l != nil && l.pinVersions {
			return true
		}
	}
	return false
}

// PinsAnyVersions reports whether some layer of the policy pins versions
// at all: without one, PinsVersions is false for every caller.
func (p *Policy) PinsAnyVersions() bool {
	return p != nil && p.anyPins
}
