package policy

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"unicode/utf8"
)

// Globs match tool names and argument values (see doc.go, "Globs"):
//
//	*       any run of characters but '/' (possibly empty)
//	**      any run of characters, '/' included (possibly empty)
//	?       one character but '/'
//	[abc]   one character of the class; [a-z] ranges; [!abc] or [^abc]
//	        negates; a class never matches '/'
//	\c      the character c itself (\*, \?, \[, \\)
//
// The whole string must match; matching is case sensitive and by Unicode
// character. A pattern that ends in "/**" also matches what precedes it:
// "/etc/**" matches "/etc" as well as "/etc/passwd". Matching takes time
// linear in the length of the string times that of the pattern, never
// more (no backtracking).

// maxGlobTokens bounds a pattern's length in tokens (characters, classes
// and stars), so that matching keeps its state in a fixed-size bit set.
const maxGlobTokens = 256

// maxGlobBytes bounds a pattern's length in bytes (classes can be long).
const maxGlobBytes = 1024

var errBadGlob = errors.New("bad glob")

type globKind uint8

const (
	globExact  globKind = iota // no wildcard: equality
	globAll                    // "**": anything
	globPrefix                 // literal then a final * or **
	globSuffix                 // a leading * or ** then literal
	globNFA                    // anything else
)

type tokKind uint8

const (
	tokLit   tokKind = iota // one rune
	tokAny                  // ?
	tokClass                // [...]
	tokStar                 // *
	tokDStar                // **
)

type globTok struct {
	kind   tokKind
	r      rune
	negate bool
	ranges []runeRange
}

type runeRange struct{ lo, hi rune }

// glob is a compiled pattern.
type glob struct {
	src   string
	kind  globKind
	lit   string // exact, prefix, suffix: the literal part
	slash bool   // prefix, suffix: the wildcard part may hold '/' (it is **)
	toks  []globTok
	alt   *glob // a pattern ending in "/**": the same pattern without it
}

// compileGlob compiles pattern.
func compileGlob(pattern string) (*glob, error) {
	if pattern == "" {
		return nil, fmt.Errorf("%w: empty pattern", errBadGlob)
	}
	if len(pattern) > maxGlobBytes {
		return nil, fmt.Errorf("%w: longer than %d bytes", errBadGlob, maxGlobBytes)
	}
	if !utf8.ValidString(pattern) {
		return nil, fmt.Errorf("%w: invalid UTF-8", errBadGlob)
	}
	toks, err := tokenize(pattern)
	if err != nil {
		return nil, err
	}
	if len(toks) > maxGlobTokens {
		return nil, fmt.Errorf("%w: more than %d characters and wildcards", errBadGlob, maxGlobTokens)
	}
	g := &glob{src: pattern, toks: toks}
	g.classify()
	if base, ok := strings.CutSuffix(pattern, "/**"); ok && base != "" && !escapesNext(base) {
		if g.alt, err = compileGlob(base); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func tokenize(p string) ([]globTok, error) {
	var toks []globTok
	for i := 0; i < len(p); {
		switch c := p[i]; c {
		case '*':
			if i+1 < len(p) && p[i+1] == '*' {
				toks = append(toks, globTok{kind: tokDStar})
				i += 2
				for i < len(p) && p[i] == '*' { // *** is **
					i++
				}
				continue
			}
			toks = append(toks, globTok{kind: tokStar})
			i++
		case '?':
			toks = append(toks, globTok{kind: tokAny})
			i++
		case '[':
			t, n, err := parseClass(p[i:])
			if err != nil {
				return nil, err
			}
			toks = append(toks, t)
			i += n
		case '\\':
			if i+1 >= len(p) {
				return nil, fmt.Errorf("%w: %q ends in a lone \\", errBadGlob, p)
			}
			r, n := utf8.DecodeRuneInString(p[i+1:])
			toks = append(toks, globTok{kind: tokLit, r: r})
			i += 1 + n
		default:
			r, n := utf8.DecodeRuneInString(p[i:])
			toks = append(toks, globTok{kind: tokLit, r: r})
			i += n
		}
	}
	return toks, nil
}

// parseClass parses the class at the start of p ("[...]") and returns it
// with its length in bytes.
func parseClass(p string) (globTok, int, error) {
	t := globTok{kind: tokClass}
	i := 1
	if i < len(p) && (p[i] == '!' || p[i] == '^') {
		t.negate = true
		i++
	}
	next := func() (rune, bool) {
		if i >= len(p) {
			return 0, false
		}
		if p[i] == '\\' {
			i++
			if i >= len(p) {
				return 0, false
			}
		}
		r, n := utf8.DecodeRuneInString(p[i:])
		i += n
		return r, true
	}
	for {
		if i >= len(p) {
			return t, 0, fmt.Errorf("%w: %q has an unterminated [class]", errBadGlob, p)
		}
		if p[i] == ']' {
			i++
			break
		}
		lo, ok := next()
		if !ok {
			return t, 0, fmt.Errorf("%w: %q has an unterminated [class]", errBadGlob, p)
		}
		hi := lo
		if i+1 < len(p) && p[i] == '-' && p[i+1] != ']' {
			i++
			if hi, ok = next(); !ok {
				return t, 0, fmt.Errorf("%w: %q has an unterminated [class]", errBadGlob, p)
			}
			if hi < lo {
				return t, 0, fmt.Errorf("%w: %q has the empty range %c-%c", errBadGlob, p, lo, hi)
			}
		}
		t.ranges = append(t.ranges, runeRange{lo, hi})
	}
	if len(t.ranges) == 0 {
		return t, 0, fmt.Errorf("%w: %q has an empty [class]", errBadGlob, p)
	}
	return t, i, nil
}

// classify picks a fast path for the common shapes.
func (g *glob) classify() {
	lits := func(ts []globTok) (string, bool) {
		var b strings.Builder
		for _, t := range ts {
			if t.kind != tokLit {
				return "", false
			}
			b.WriteRune(t.r)
		}
		return b.String(), true
	}
	ts := g.toks
	g.kind = globNFA
	if s, ok := lits(ts); ok {
		g.kind, g.lit = globExact, s
		return
	}
	if len(ts) == 1 && ts[0].kind == tokDStar {
		g.kind = globAll
		return
	}
	if last := ts[len(ts)-1].kind; last == tokStar || last == tokDStar {
		if s, ok := lits(ts[:len(ts)-1]); ok {
			g.kind, g.lit, g.slash = globPrefix, s, last == tokDStar
			return
		}
	}
	if first := ts[0].kind; first == tokStar || first == tokDStar {
		if s, ok := lits(ts[1:]); ok {
			g.kind, g.lit, g.slash = globSuffix, s, first == tokDStar
		}
	}
}

// match reports whether s matches the whole pattern.
func (g *glob) match(s string) bool {
	if g.match1(s) {
		return true
	}
	return g.alt != nil && g.alt.match1(s)
}

func (g *glob) match1(s string) bool {
	switch g.kind {
	case globExact:
		return s == g.lit
	case globAll:
		return true
	case globPrefix:
		rest, ok := strings.CutPrefix(s, g.lit)
		return ok && (g.slash || !strings.Contains(rest, "/"))
	case globSuffix:
		rest, ok := strings.CutSuffix(s, g.lit)
		return ok && (g.slash || !strings.Contains(rest, "/"))
	}
	return g.nfa(s)
}

// stateSet holds the positions in the token list still alive.
type stateSet [maxGlobTokens/64 + 1]uint64

func (s *stateSet) set(i int)      { s[i>>6] |= 1 << (i & 63) }
func (s *stateSet) has(i int) bool { return s[i>>6]&(1<<(i&63)) != 0 }
func (s *stateSet) empty() bool {
	for _, w := range s {
		if w != 0 {
			return false
		}
	}
	return true
}

// closure adds, for every live star, the position after it (a star may
// match nothing).
func (g *glob) closure(s *stateSet) {
	for i, t := range g.toks {
		if (t.kind == tokStar || t.kind == tokDStar) && s.has(i) {
			s.set(i + 1)
		}
	}
}

// nfa runs the pattern as a nondeterministic automaton over s, one state
// per token position: time O(len(s) × tokens), no backtracking.
func (g *glob) nfa(s string) bool {
	var cur stateSet
	cur.set(0)
	g.closure(&cur)
	n := len(g.toks)
	for _, r := range s {
		var next stateSet
		for w, word := range cur {
			for word != 0 {
				b := bits.TrailingZeros64(word)
				word &^= 1 << b
				i := w<<6 | b
				if i >= n {
					continue
				}
				t := &g.toks[i]
				switch t.kind {
				case tokStar:
					if r != '/' {
						next.set(i)
					}
				case tokDStar:
					next.set(i)
				case tokLit:
					if r == t.r {
						next.set(i + 1)
					}
				case tokAny:
					if r != '/' {
						next.set(i + 1)
					}
				case tokClass:
					if r != '/' && t.inClass(r) {
						next.set(i + 1)
					}
				}
			}
		}
		if next.empty() {
			return false
		}
		g.closure(&next)
		cur = next
	}
	return cur.has(n)
}

func (t *globTok) inClass(r rune) bool {
	in := false
	for _, rg := range t.ranges {
		if r >= rg.lo && r <= rg.hi {
			in = true
			break
		}
	}
	return in != t.negate
}

// escapesNext reports whether s ends in an odd number of backslashes, so
// that its last one escapes what follows s.
func escapesNext(s string) bool {
	n := len(s) - len(strings.TrimRight(s, `\`))
	return n%2 == 1
}
