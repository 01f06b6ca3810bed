package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// The loop guard of a document (doc.go, "Loop guard"): the same call —
// tool and canonical arguments — made again and again in a row in one
// session is warned about, then asked about, then denied.
//
//	loop_guard:
//	  window: 10m      # a longer pause between two calls starts a new run
//	  warn: 3          # the 3rd call in a row runs with meta.loop_count set
//	  ask: 5           # the 5th is parked for an approver
//	  deny: 10         # the 10th and later are denied
//	  scope: session   # or run
//	  exempt: [poll_*] # tools never guarded (polling tools)
//	  enabled: true
//
// The section is the document's own, beside its layers: only whoever
// applies the document (the operator: the installation's or the tenant's
// admin) can change or exempt, never an agent layer, a grant, an approval
// or a caller. A document without the section has the defaults; with no
// document in force there is no guard, as there are no rules.

// Defaults of the loop guard.
const (
	DefaultLoopWindow = 10 * time.Minute
	DefaultLoopWarn   = 3
	DefaultLoopAsk    = 5
	DefaultLoopDeny   = 10
	// maxLoopThreshold bounds a threshold.
	maxLoopThreshold = 1000
)

// LoopGuard is a document's loop guard.
type LoopGuard struct {
	Window time.Duration
	// Warn, Ask and Deny are the counts at which a run of the same call is
	// warned about, asked about and denied; 0 = that step is off.
	Warn, Ask, Deny int
	// Scope is "session", "run" or "chain": what a run is counted in.
	// "chain" counts a delegated call in its delegation chain (its root
	// call: docs/delegation.md) and any other call in its session.
	Scope  string
	exempt []*glob
}

// Guards reports whether calls of tool are guarded (not exempt).
func (g *LoopGuard) Guards(tool string) bool {
	for _, e := range g.exempt {
		if e.match(tool) {
			return false
		}
	}
	return true
}

// LoopGuard returns the document's loop guard; nil with no policy or when
// the document turns it off.
func (p *Policy) LoopGuard() *LoopGuard {
	if p == nil {
		return nil
	}
	return p.loop
}

// Fingerprint is the loop guard's fingerprint of a call: the hex SHA-256
// of the tool name and the canonical form of its arguments (Canonicalize:
// key order, number forms and white space do not matter).
func Fingerprint(tool string, args []byte) (string, error) {
	c, err := Canonicalize(args)
	if err != nil {
		return "", err
	}
	return fingerprint(tool, c), nil
}

// FingerprintOf is Fingerprint of arguments already parsed (ParseArgs):
// the same value, without reading them again.
func FingerprintOf(tool string, args *Args) string {
	return fingerprint(tool, args.Canonical())
}

func fingerprint(tool string, canonical []byte) string {
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(canonical)
	return hex.EncodeToString(h.Sum(nil))
}

type docLoop struct {
	line             int
	enabled          *bool
	window           time.Duration
	warn, ask, deny  *int64
	scope            string
	scopeLine        int
	exempt           []docString
	warnL, askL, dnL int
}

func (d decoder) loopGuard(n *yaml.Node) *docLoop {
	g := &docLoop{line: n.Line}
	const f = "loop_guard"
	threshold := func(dst **int64, line *int, name string) func(_, v *yaml.Node) {
		return func(_, v *yaml.Node) {
			*line = v.Line
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" {
				d.ps.add(v.Line, f+"."+name, "must be a whole number (0 = off), not %s", describe(v))
				return
			}
			x, err := strconv.ParseInt(v.Value, 10, 64)
			if err != nil || x < 0 || x > maxLoopThreshold {
				d.ps.add(v.Line, f+"."+name, "must be from 0 (off) to %d", maxLoopThreshold)
				return
			}
			*dst = &x
		}
	}
	d.mapping(n, f, map[string]func(k, v *yaml.Node){
		"enabled": func(_, v *yaml.Node) {
			if b, ok := d.boolean(v, f+".enabled"); ok {
				g.enabled = &b
			}
		},
		"window": func(_, v *yaml.Node) { g.window, _ = d.period(v, f+".window", time.Second) },
		"warn":   threshold(&g.warn, &g.warnL, "warn"),
		"ask":    threshold(&g.ask, &g.askL, "ask"),
		"deny":   threshold(&g.deny, &g.dnL, "deny"),
		"scope": func(_, v *yaml.Node) {
			g.scopeLine = v.Line
			if s, ok := d.str(v, f+".scope"); ok {
				if s != "session" && s != "run" && s != "chain" {
					d.ps.add(v.Line, f+".scope", "must be session, run or chain, not %q", s)
				}
				g.scope = s
			}
		},
		"exempt": func(_, v *yaml.Node) {
			d.seq(v, f+".exempt", func(i int, e *yaml.Node) {
				if s, ok := d.str(e, fmt.Sprintf("%s.exempt[%d]", f, i)); ok {
					g.exempt = append(g.exempt, docString{s, e.Line})
				}
			})
		},
	}, nil)
	return g
}

// compileLoopGuard compiles a document's section; nil dl = the defaults.
func compileLoopGuard(dl *docLoop, ps *problems) *LoopGuard {
	g := &LoopGuard{Window: DefaultLoopWindow, Warn: DefaultLoopWarn, Ask: DefaultLoopAsk, Deny: DefaultLoopDeny, Scope: "session"}
	if dl == nil {
		return g
	}
	if dl.enabled != nil && !*dl.enabled {
		return nil
	}
	if dl.window > 0 {
		g.Window = dl.window
	}
	if dl.scope != "" {
		g.Scope = dl.scope
	}
	for _, t := range []struct {
		v   *int64
		dst *int
	}{{dl.warn, &g.Warn}, {dl.ask, &g.Ask}, {dl.deny, &g.Deny}} {
		if t.v != nil {
			*t.dst = int(*t.v)
		}
	}
	// Each step that is on must come after the ones before it.
	last, lastName := 0, ""
	for _, s := range []struct {
		name string
		n    int
		line int
	}{{"warn", g.Warn, dl.warnL}, {"ask", g.Ask, dl.askL}, {"deny", g.Deny, dl.dnL}} {
		if s.n == 0 {
			continue
		}
		if s.n <= last {
			line := s.line
			if line == 0 {
				line = dl.line
			}
			ps.add(line, "loop_guard."+s.name, "%d must be above %s (%d)", s.n, lastName, last)
		}
		last, lastName = s.n, s.name
	}
	for i, e := range dl.exempt {
		gl, err := compileGlob(e.s)
		if err != nil {
			ps.add(e.line, fmt.Sprintf("loop_guard.exempt[%d]", i), "%v", err)
			continue
		}
		g.exempt = append(g.exempt, gl)
	}
	return g
}

// canonicalLoop renders the section for the canonical form; nil when the
// document has none.
func canonicalLoop(dl *docLoop) map[string]any {
	if dl == nil {
		return nil
	}
	c := map[string]any{}
	if dl.enabled != nil {
		c["enabled"] = *dl.enabled
	}
	if dl.window > 0 {
		c["window"] = dl.window.String()
	}
	for name, v := range map[string]*int64{"warn": dl.warn, "ask": dl.ask, "deny": dl.deny} {
		if v != nil {
			c[name] = *v
		}
	}
	if dl.scope != "" {
		c["scope"] = dl.scope
	}
	if len(dl.exempt) > 0 {
		ex := []string{}
		for _, e := range dl.exempt {
			ex = append(ex, e.s)
		}
		c["exempt"] = ex
	}
	return c
}
