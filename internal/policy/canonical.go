package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/toolwire/toolwire/internal/registry"
)

// Errors of ParseArgs and Canonicalize. Each is wrapped with the offset
// where it was found; match them with errors.Is.
var (
	// ErrInvalidJSON: the text is not JSON (RFC 8259).
	ErrInvalidJSON = errors.New("policy: invalid JSON")
	// ErrDuplicateKey: an object names a member twice. encoding/json keeps
	// the last one, other decoders the first, so such arguments have no
	// single meaning and are refused.
	ErrDuplicateKey = errors.New("policy: duplicate object key")
	// ErrInvalidString: a string holds invalid UTF-8 or an unpaired UTF-16
	// surrogate escape (\ud800). encoding/json turns both into U+FFFD,
	// which would make different arguments look the same.
	ErrInvalidString = errors.New("policy: invalid string")
	// ErrNumberRange: a number's exponent is beyond ±999999999.
	ErrNumberRange = errors.New("policy: number out of range")
	// ErrTooDeep: arrays and objects nest deeper than MaxArgsDepth.
	ErrTooDeep = errors.New("policy: JSON nests too deep")
	// ErrNotObject: arguments are a JSON value other than an object.
	ErrNotObject = errors.New("policy: arguments are not a JSON object")
)

// MaxArgsDepth bounds the nesting of arrays and objects that ParseArgs and
// Canonicalize accept. The dispatcher's own limit (32 by default) is far
// lower; this one only keeps the parser's recursion bounded.
const MaxArgsDepth = 512

// Args are a call's arguments parsed once for every decision that needs
// them: the decoded value (for argument globs and CEL), the canonical JSON
// text and its SHA-256 (for approval bindings and the loop guard). An Args
// is immutable and safe for concurrent use.
type Args struct {
	value     map[string]any
	canonical []byte
	sum       [sha256.Size]byte
}

// emptyArgs stands for a nil *Args: no arguments, {}.
var emptyArgs = mustParseArgs("{}")

func mustParseArgs(s string) *Args {
	a, err := ParseArgs([]byte(s))
	if err != nil {
		panic(err) // only for constants of this package
	}
	return a
}

// ParseArgs parses a call's arguments, a JSON object. Empty input (or only
// white space) stands for {}. It is stricter than encoding/json: it
// refuses duplicate keys, invalid UTF-8, unpaired surrogate escapes,
// nesting deeper than MaxArgsDepth and exponents beyond ±999999999 (see
// the Err variables), so the dispatcher answers such calls VALIDATION.
func ParseArgs(raw []byte) (*Args, error) {
	if isBlank(raw) {
		raw = []byte("{}")
	}
	p := jsonParser{data: raw}
	v, err := p.parseTop()
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, ErrNotObject
	}
	return &Args{value: m, canonical: p.out, sum: sha256.Sum256(p.out)}, nil
}

// Value returns the decoded arguments: objects are map[string]any, arrays
// []any, numbers int64 when they are whole and fit, float64 otherwise
// (±Inf beyond its range), and strings, bools and nil as such. The caller
// must not modify it.
func (a *Args) Value() map[string]any { return a.orEmpty().value }

// Canonical returns the canonical JSON text of the arguments (see
// Canonicalize). The caller must not modify it.
func (a *Args) Canonical() []byte { return a.orEmpty().canonical }

// SHA256 returns the SHA-256 of Canonical.
func (a *Args) SHA256() [sha256.Size]byte { return a.orEmpty().sum }

// Hash returns SHA256 as lower-case hex, the form approval records and
// the loop guard store.
func (a *Args) Hash() string {
	s := a.orEmpty().sum
	return hex.EncodeToString(s[:])
}

func (a *Args) orEmpty() *Args {
	if a == nil {
		return emptyArgs
	}
	return a
}

// ArgsDigest is the SHA-256 of the canonical form of a call's arguments
// (ParseArgs): two spellings of the same arguments have one digest.
func ArgsDigest(raw []byte) ([]byte, error) {
	a, err := ParseArgs(raw)
	if err != nil {
		return nil, err
	}
	sum := a.SHA256()
	return sum[:], nil
}

// Canonicalize returns the canonical form of any JSON text: no white space
// outside strings; object members sorted by the UTF-8 bytes of their keys
// (that is, by code point); strings with only `"`, `\` and control
// characters escaped (as \b \f \n \r \t or \u00xx), everything else as
// UTF-8; numbers as the decimal number they denote, so 1, 1.0, 1e0 and
// 10E-1 are all written 1, -0 is 0, and no number is rounded to a float64
// (9007199254740993 stays itself). A number is written as its digits when
// the decimal point falls within 21 places of them (1.5, 0.0001, 1e20 →
// 100000000000000000000), otherwise in exponent form (1e+21, 1.5e-7),
// which agrees with JavaScript's and RFC 8785's form wherever a float64
// holds the number exactly. Two texts have the same canonical form exactly
// when they denote the same JSON value. It refuses what ParseArgs refuses.
func Canonicalize(raw []byte) ([]byte, error) {
	p := jsonParser{data: raw}
	if _, err := p.parseTop(); err != nil {
		return nil, err
	}
	return p.out, nil
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if !isSpace(c) {
			return false
		}
	}
	return true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// jsonParser decodes JSON into generic values and writes the canonical
// text of what it decodes to out in the same pass. An object's members
// are written in arrival order and reordered when the object closes.
type jsonParser struct {
	data    []byte
	pos     int
	depth   int
	out     []byte
	members []member // members of the open objects, innermost last
	scratch []byte
}

// member is one object member whose canonical text is out[start:end].
type member struct {
	key        string
	start, end int
}

func (p *jsonParser) fail(err error, what string) error {
	return fmt.Errorf("%w at offset %d: %s", err, p.pos, what)
}

func (p *jsonParser) parseTop() (any, error) {
	p.out = make([]byte, 0, len(p.data))
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, p.fail(ErrInvalidJSON, "data after the value")
	}
	return v, nil
}

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.data) && isSpace(p.data[p.pos]) {
		p.pos++
	}
}

func (p *jsonParser) value() (any, error) {
	p.skipSpace()
	if p.pos >= len(p.data) {
		return nil, p.fail(ErrInvalidJSON, "unexpected end")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		p.out = appendCanonicalString(p.out, s)
		return s, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		for _, lit := range jsonLiterals {
			if bytes.HasPrefix(p.data[p.pos:], lit.text) {
				p.pos += len(lit.text)
				p.out = append(p.out, lit.text...)
				return lit.v, nil
			}
		}
		return nil, p.fail(ErrInvalidJSON, fmt.Sprintf("unexpected character %q", c))
	}
}

var jsonLiterals = [...]struct {
	text []byte
	v    any
}{{[]byte("true"), true}, {[]byte("false"), false}, {[]byte("null"), nil}}

func (p *jsonParser) enter() error {
	if p.depth++; p.depth > MaxArgsDepth {
		return p.fail(ErrTooDeep, fmt.Sprintf("over %d levels", MaxArgsDepth))
	}
	return nil
}

func (p *jsonParser) object() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // {
	m := map[string]any{}
	p.out = append(p.out, '{')
	first := len(p.out)
	base := len(p.members)
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
	} else {
		for {
			p.skipSpace()
			if p.pos >= len(p.data) || p.data[p.pos] != '"' {
				return nil, p.fail(ErrInvalidJSON, "expected a string key")
			}
			start := len(p.out)
			key, err := p.str()
			if err != nil {
				return nil, err
			}
			if _, dup := m[key]; dup {
				return nil, p.fail(ErrDuplicateKey, strconv.Quote(key))
			}
			p.out = appendCanonicalString(p.out, key)
			p.skipSpace()
			if p.pos >= len(p.data) || p.data[p.pos] != ':' {
				return nil, p.fail(ErrInvalidJSON, "expected ':'")
			}
			p.pos++
			p.out = append(p.out, ':')
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			m[key] = v
			p.members = append(p.members, member{key: key, start: start, end: len(p.out)})
			p.skipSpace()
			if p.pos >= len(p.data) {
				return nil, p.fail(ErrInvalidJSON, "unexpected end in an object")
			}
			if c := p.data[p.pos]; c == '}' {
				p.pos++
				break
			} else if c != ',' {
				return nil, p.fail(ErrInvalidJSON, "expected ',' or '}'")
			}
			p.pos++
		}
	}
	p.sortMembers(first, p.members[base:])
	p.members = p.members[:base]
	p.out = append(p.out, '}')
	p.depth--
	return m, nil
}

// sortMembers rewrites out[first:] (the members ms, written back to back)
// in key order with commas between them.
func (p *jsonParser) sortMembers(first int, ms []member) {
	if len(ms) == 0 {
		return
	}
	p.scratch = append(p.scratch[:0], p.out[first:]...)
	slices.SortFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
	p.out = p.out[:first]
	for i, m := range ms {
		if i > 0 {
			p.out = append(p.out, ',')
		}
		p.out = append(p.out, p.scratch[m.start-first:m.end-first]...)
	}
}

func (p *jsonParser) array() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // [
	l := []any{}
	p.out = append(p.out, '[')
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
	} else {
		for {
			if len(l) > 0 {
				p.out = append(p.out, ',')
			}
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			l = append(l, v)
			p.skipSpace()
			if p.pos >= len(p.data) {
				return nil, p.fail(ErrInvalidJSON, "unexpected end in an array")
			}
			if c := p.data[p.pos]; c == ']' {
				p.pos++
				break
			} else if c != ',' {
				return nil, p.fail(ErrInvalidJSON, "expected ',' or ']'")
			}
			p.pos++
		}
	}
	p.out = append(p.out, ']')
	p.depth--
	return l, nil
}

// str decodes the string at p.pos (which is '"').
func (p *jsonParser) str() (string, error) {
	p.pos++
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			raw := p.data[start:p.pos]
			if !utf8.Valid(raw) {
				return "", p.fail(ErrInvalidString, "invalid UTF-8")
			}
			p.pos++
			return string(raw), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.fail(ErrInvalidJSON, "control character in a string")
		}
		p.pos++
	}
	buf := append([]byte(nil), p.data[start:p.pos]...)
	for {
		if p.pos >= len(p.data) {
			return "", p.fail(ErrInvalidJSON, "unterminated string")
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			if !utf8.Valid(buf) {
				return "", p.fail(ErrInvalidString, "invalid UTF-8")
			}
			return string(buf), nil
		case c < 0x20:
			return "", p.fail(ErrInvalidJSON, "control character in a string")
		case c != '\\':
			buf = append(buf, c)
			p.pos++
			continue
		}
		if p.pos+1 >= len(p.data) {
			return "", p.fail(ErrInvalidJSON, "unterminated escape")
		}
		e := p.data[p.pos+1]
		p.pos += 2
		if c, ok := registry.JSONEscape(e); ok {
			buf = append(buf, c)
			continue
		}
		switch e {
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.fail(ErrInvalidJSON, `bad \u escape`)
			}
			if utf16.IsSurrogate(r) {
				var r2 rune = -1
				if p.pos+1 < len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
					p.pos += 2
					if r2, ok = p.hex4(); !ok {
						return "", p.fail(ErrInvalidJSON, `bad \u escape`)
					}
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return "", p.fail(ErrInvalidString, "unpaired surrogate escape")
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", p.fail(ErrInvalidJSON, fmt.Sprintf("bad escape \\%c", e))
		}
	}
}

func (p *jsonParser) hex4() (rune, bool) {
	if p.pos+4 > len(p.data) {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	p.pos += 4
	return r, true
}

// number scans a JSON number, writes its canonical form and returns its
// value.
func (p *jsonParser) number() (any, error) {
	start := p.pos
	d := p.data
	i := p.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		p.pos = i
		return nil, p.fail(ErrInvalidJSON, "bad number")
	}
	if i < len(d) && d[i] == '.' {
		i++
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			p.pos = i
			return nil, p.fail(ErrInvalidJSON, "bad number")
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			p.pos = i
			return nil, p.fail(ErrInvalidJSON, "bad number")
		}
	}
	p.pos = i
	text := string(d[start:i])
	before := len(p.out)
	var err error
	if p.out, err = appendCanonicalNumber(p.out, text); err != nil {
		return nil, p.fail(err, text)
	}
	return numberValue(string(p.out[before:])), nil
}

// appendCanonicalNumber appends the canonical form of the JSON number text
// (see Canonicalize).
func appendCanonicalNumber(dst []byte, text string) ([]byte, error) {
	neg := strings.HasPrefix(text, "-")
	text = strings.TrimPrefix(text, "-")
	mant, exp := text, int64(0)
	if k := strings.IndexAny(text, "eE"); k >= 0 {
		mant = text[:k]
		es := strings.TrimPrefix(text[k+1:], "+")
		digits := strings.TrimPrefix(es, "-")
		digits = strings.TrimLeft(digits, "0")
		if len(digits) > 9 {
			return dst, ErrNumberRange
		}
		e, _ := strconv.ParseInt(digits, 10, 64) // "" → 0
		if strings.HasPrefix(es, "-") {
			e = -e
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	// value = 0.(digits) style: digits = intPart+frac, exponent adjusted.
	digits := intPart + frac
	exp -= int64(len(frac))
	lead := 0
	for lead < len(digits) && digits[lead] == '0' {
		lead++
	}
	digits = digits[lead:]
	trail := len(digits)
	for trail > 0 && digits[trail-1] == '0' {
		trail--
	}
	exp += int64(len(digits) - trail)
	digits = digits[:trail]
	if digits == "" {
		return append(dst, '0'), nil
	}
	if neg {
		dst = append(dst, '-')
	}
	// n is the position of the decimal point relative to the digits'
	// start: value = 0.digits × 10^n.
	n := int64(len(digits)) + exp
	switch {
	case exp >= 0 && n <= 21:
		dst = append(dst, digits...)
		for range exp {
			dst = append(dst, '0')
		}
	case n > 0 && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case n > -6 && n <= 0:
		dst = append(dst, "0."...)
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if len(digits) > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, n-1, 10)
	}
	return dst, nil
}

// numberValue returns the Go value of a canonical number: int64 when it
// is whole and fits, float64 otherwise.
func numberValue(canon string) any {
	if !strings.ContainsAny(canon, ".e") {
		if i, err := strconv.ParseInt(canon, 10, 64); err == nil {
			return i
		}
	}
	f, _ := strconv.ParseFloat(canon, 64) // ±Inf on overflow, 0 on underflow
	return f
}

// appendCanonicalString appends s as a canonical JSON string.
func appendCanonicalString(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	last := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[last:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		last = i + 1
	}
	dst = append(dst, s[last:]...)
	return append(dst, '"')
}
