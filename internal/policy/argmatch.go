package policy

import (
	"fmt"
	"strconv"
	"strings"
)

// maxPathSegments bounds the depth of an argument field path.
const maxPathSegments = 32

// argPattern is one `args` entry of a rule or a grant: a field path into
// the arguments and what the value there must be.
type argPattern struct {
	field string   // as written: "repo.owner"
	path  []string // ["repo", "owner"]
	glob  *glob    // a string pattern; nil for an exact one
	exact any      // an exact pattern: bool, nil, int64 or float64
}

// compileArgPattern compiles field: pattern. pattern is a string (a glob)
// or, for an exact match, a bool, nil or a number (int64 or float64, or
// any Go integer).
func compileArgPattern(field string, pattern any) (*argPattern, error) {
	path := strings.Split(field, ".")
	if len(path) > maxPathSegments {
		return nil, fmt.Errorf("field path %q has more than %d parts", field, maxPathSegments)
	}
	for _, seg := range path {
		if seg == "" {
			return nil, fmt.Errorf("field path %q has an empty part", field)
		}
	}
	ap := &argPattern{field: field, path: path}
	switch v := pattern.(type) {
	case string:
		g, err := compileGlob(v)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", field, err)
		}
		ap.glob = g
	case bool, nil, int64, float64:
		ap.exact = v
	case int:
		ap.exact = int64(v)
	default:
		return nil, fmt.Errorf("field %q: a pattern is a string (glob), a number, true, false or null, not %T", field, pattern)
	}
	return ap, nil
}

// matchAny reports whether some value at the path matches (deny and ask
// rules: reading more values can only make them match).
func (ap *argPattern) matchAny(args map[string]any) bool {
	return ap.anyAt(args, 0)
}

// matchEvery reports whether there is a value at the path and every value
// there matches (allow rules and grants: one value outside the pattern
// must keep them from matching). A string with a ".." path segment never
// matches a glob here, so "/tmp/**" does not allow "/tmp/../etc/passwd".
func (ap *argPattern) matchEvery(args map[string]any) bool {
	ok, n := ap.everyAt(args, 0)
	return ok && n > 0
}

// anyAt: arrays on the way (and at the end) fan out to their elements.
func (ap *argPattern) anyAt(v any, seg int) bool {
	if l, ok := v.([]any); ok {
		for _, e := range l {
			if ap.anyAt(e, seg) {
				return true
			}
		}
		return false
	}
	if seg == len(ap.path) {
		return ap.test(v, false)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	c, ok := m[ap.path[seg]]
	return ok && ap.anyAt(c, seg+1)
}

// everyAt returns whether every value reached matches (a missing field
// or a non-object on the way does not) and how many were reached.
func (ap *argPattern) everyAt(v any, seg int) (bool, int) {
	if l, ok := v.([]any); ok {
		total := 0
		for _, e := range l {
			ok, n := ap.everyAt(e, seg)
			if !ok {
				return false, 0
			}
			total += n
		}
		return true, total
	}
	if seg == len(ap.path) {
		return ap.test(v, true), 1
	}
	m, ok := v.(map[string]any)
	if !ok {
		return false, 0
	}
	c, ok := m[ap.path[seg]]
	if !ok {
		return false, 0
	}
	return ap.everyAt(c, seg+1)
}

// test matches one value that is not an array.
func (ap *argPattern) test(v any, every bool) bool {
	if ap.glob != nil {
		s, ok := v.(string)
		if !ok || (every && hasDotDot(s)) {
			return false
		}
		return ap.glob.match(s)
	}
	return sameScalar(ap.exact, v)
}

// sameScalar compares an exact pattern with a value: booleans and null by
// identity, numbers by value.
func sameScalar(pattern, v any) bool {
	switch p := pattern.(type) {
	case nil:
		return v == nil
	case bool:
		b, ok := v.(bool)
		return ok && b == p
	case int64:
		switch n := v.(type) {
		case int64:
			return n == p
		case float64:
			return n == float64(p)
		}
	case float64:
		switch n := v.(type) {
		case int64:
			return float64(n) == p
		case float64:
			return n == p
		}
	}
	return false
}

// hasDotDot reports whether s has a ".." segment between slashes.
func hasDotDot(s string) bool {
	return s == ".." || strings.HasPrefix(s, "../") || strings.HasSuffix(s, "/..") || strings.Contains(s, "/../")
}

// patternText renders a pattern as the document wrote it, for messages.
func (ap *argPattern) patternText() string {
	if ap.glob != nil {
		return strconv.Quote(ap.glob.src)
	}
	switch v := ap.exact.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return "?"
}

// explain says, for Explain, why the pattern did or did not match.
func (ap *argPattern) explain(args map[string]any) string {
	var vals []string
	collect(args, ap.path, 0, &vals)
	have := "is missing"
	if len(vals) > 0 {
		have = "is " + strings.Join(vals, ", ")
	}
	return fmt.Sprintf("args.%s %s; the pattern is %s", ap.field, have, ap.patternText())
}

// collect renders (at most a few of) the values at path, for messages.
func collect(v any, path []string, seg int, out *[]string) {
	const most = 5
	if len(*out) >= most {
		return
	}
	if l, ok := v.([]any); ok {
		for _, e := range l {
			collect(e, path, seg, out)
		}
		return
	}
	if seg == len(path) {
		s := ""
		switch x := v.(type) {
		case string:
			s = strconv.Quote(truncate(x, 80))
		case map[string]any:
			s = "an object"
		default:
			s = fmt.Sprint(x)
			if x == nil {
				s = "null"
			}
		}
		*out = append(*out, s)
		return
	}
	if m, ok := v.(map[string]any); ok {
		if c, ok := m[path[seg]]; ok {
			collect(c, path, seg+1, out)
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
