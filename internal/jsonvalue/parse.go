package jsonvalue

import (
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of arrays and objects Parse accepts: the
// outermost container is at depth 1. The dispatcher's own limit (32 by
// default, a tool's spec may raise it) is checked before parsing, on the
// text; this one bounds the parser's recursion whatever the caller checked.
const MaxDepth = 512

// maxExponentDigits bounds a number's exponent (after its leading zeros),
// so that no form of a number can grow without bound.
const maxExponentDigits = 9

// parse reads one JSON text into the schema form (see doc.go, "Rules").
func parse(data []byte) (any, error) {
	p := parser{data: data}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.pos < len(p.data) {
		return nil, p.unexpected("after top-level value")
	}
	return v, nil
}

type parser struct {
	data []byte
	pos  int
	// text is data as a string, made when the first string or number
	// needs it: the strings without escapes and the numbers of the schema
	// form are pieces of it, one allocation for all of them.
	text string
}

// slice returns data[i:j] as a string, a piece of p.text.
func (p *parser) slice(i, j int) string {
	if len(p.text) != len(p.data) {
		p.text = string(p.data)
	}
	return p.text[i:j]
}

func (p *parser) space() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (any, error) {
	if p.pos >= len(p.data) {
		return nil, p.errEnd()
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, err := p.string()
		if err != nil {
			return nil, err
		}
		return s, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, p.unexpected("looking for beginning of value")
}

func (p *parser) literal(word string) error {
	for i := range len(word) {
		if p.pos >= len(p.data) {
			return p.errEnd()
		}
		if p.data[p.pos] != word[i] {
			return p.unexpected("in literal " + word)
		}
		p.pos++
	}
	return nil
}

func (p *parser) tooDeep(depth int) error {
	if depth <= MaxDepth {
		return nil
	}
	return &Error{Kind: ErrTooDeep, Offset: p.pos, Msg: "arrays and objects nest deeper than " + strconv.Itoa(MaxDepth) + " levels"}
}

func (p *parser) object(depth int) (any, error) {
	if err := p.tooDeep(depth); err != nil {
		return nil, err
	}
	p.pos++ // {
	m := map[string]any{}
	p.space()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return m, nil
	}
	for {
		if p.pos >= len(p.data) {
			return nil, p.errEnd()
		}
		if p.data[p.pos] != '"' {
			return nil, p.unexpected("looking for beginning of object key string")
		}
		key, err := p.string()
		if err != nil {
			return nil, err
		}
		p.space()
		if p.pos >= len(p.data) {
			return nil, p.errEnd()
		}
		if p.data[p.pos] != ':' {
			return nil, p.unexpected("after object key")
		}
		p.pos++
		p.space()
		v, err := p.value(depth)
		if err != nil {
			return nil, within(err, key)
		}
		n := len(m)
		if m[key] = v; len(m) == n {
			return nil, &DuplicateKeyError{Pointer: "/" + escapePointer(key), Key: key}
		}
		if more, err := p.more('}', "after object key:value pair"); !more || err != nil {
			return m, err
		}
	}
}

// more reads what follows a member of an object or an element of an
// array: a comma (true) or the closing bracket (false).
func (p *parser) more(closing byte, context string) (bool, error) {
	p.space()
	if p.pos >= len(p.data) {
		return false, p.errEnd()
	}
	switch p.data[p.pos] {
	case ',':
		p.pos++
		p.space()
		return true, nil
	case closing:
		p.pos++
		return false, nil
	}
	return false, p.unexpected(context)
}

func (p *parser) array(depth int) (any, error) {
	if err := p.tooDeep(depth); err != nil {
		return nil, err
	}
	p.pos++ // [
	a := []any{}
	p.space()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return a, nil
	}
	for {
		v, err := p.value(depth)
		if err != nil {
			return nil, within(err, strconv.Itoa(len(a)))
		}
		a = append(a, v)
		if more, err := p.more(']', "after array element"); !more || err != nil {
			return a, err
		}
	}
}

// number reads a number in JSON's grammar and keeps its text.
func (p *parser) number() (any, error) {
	start := p.pos
	if p.data[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos >= len(p.data):
		return nil, p.errEnd()
	case p.data[p.pos] == '0':
		p.pos++
	case p.data[p.pos] >= '1' && p.data[p.pos] <= '9':
		p.digits()
	default:
		return nil, p.unexpected("in numeric literal")
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if p.digits() == 0 {
			return nil, p.unexpected("after decimal point in numeric literal")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		if err := p.exponent(start); err != nil {
			return nil, err
		}
	}
	if text := p.data[start:p.pos]; len(text) <= 3 {
		if n, ok := smallInteger(text); ok {
			return smallNumbers[n], nil
		}
	}
	return json.Number(p.slice(start, p.pos)), nil
}

// smallNumbers are the integers 0 to 999 in the schema form, boxed once:
// the commonest numbers cost no allocation.
var smallNumbers = func() (t [1000]any) {
	for i := range t {
		t[i] = json.Number(strconv.Itoa(i))
	}
	return t
}()

// smallInteger returns the value of text when it is only digits (JSON
// allows no leading zero: it is then the integer's own text).
func smallInteger(text []byte) (int, bool) {
	n := 0
	for _, c := range text {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// exponent reads the exponent of the number that began at start; p.pos
// is at its 'e'.
func (p *parser) exponent(start int) error {
	p.pos++
	if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
		p.pos++
	}
	first := p.pos
	n := p.digits()
	if n == 0 {
		return p.unexpected("in exponent of numeric literal")
	}
	for i := first; i < p.pos && p.data[i] == '0'; i++ {
		n--
	}
	if n > maxExponentDigits {
		return &Error{Kind: ErrNumberRange, Offset: start, Msg: "a number's exponent is beyond ±999999999"}
	}
	return nil
}

// digits skips a run of digits and returns its length.
func (p *parser) digits() int {
	start := p.pos
	for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
		p.pos++
	}
	return p.pos - start
}

// string reads a string literal. Without escapes it is a piece of p.text,
// no allocation of its own.
func (p *parser) string() (string, error) {
	p.pos++ // "
	start := p.pos
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			s := p.data[start:p.pos]
			if !utf8.Valid(s) {
				return "", invalidUTF8(s, start)
			}
			p.pos++
			return p.slice(start, p.pos-1), nil
		case c == '\\':
			return p.escaped(start)
		case c < 0x20:
			return "", p.unexpected("in string literal")
		}
		p.pos++
	}
	return "", p.errEnd()
}

// escaped finishes a string with escapes, which began at start; p.pos is
// at the first backslash.
func (p *parser) escaped(start int) (string, error) {
	b := make([]byte, 0, p.pos-start+16)
	b = append(b, p.data[start:p.pos]...)
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			if !utf8.Valid(b) {
				// Escapes write only valid UTF-8: the invalid bytes are the text's.
				return "", invalidUTF8(p.data[start:p.pos-1], start)
			}
			return string(b), nil
		case c < 0x20:
			return "", p.unexpected("in string literal")
		case c != '\\':
			b = append(b, c)
			p.pos++
			continue
		}
		p.pos++ // backslash
		if p.pos >= len(p.data) {
			return "", p.errEnd()
		}
		var err error
		if b, err = p.escape(b); err != nil {
			return "", err
		}
	}
	return "", p.errEnd()
}

// escape appends what the escape at p.pos (the byte after its backslash)
// stands for, and moves past it.
func (p *parser) escape(b []byte) ([]byte, error) {
	e := p.data[p.pos]
	if c, ok := unescape(e); ok {
		p.pos++
		return append(b, c), nil
	}
	if e != 'u' {
		return nil, p.unexpected("in string escape code")
	}
	r, ok := p.hex4(p.pos + 1)
	if !ok {
		return nil, p.badUnicode(p.pos)
	}
	at := p.pos - 1 // the backslash
	p.pos += 5
	if !utf16.IsSurrogate(r) {
		return utf8.AppendRune(b, r), nil
	}
	// A pair only if a low surrogate escape follows at once.
	if p.pos+1 < len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
		r2, ok := p.hex4(p.pos + 2)
		if !ok {
			return nil, p.badUnicode(p.pos + 1)
		}
		if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
			p.pos += 6
			return utf8.AppendRune(b, dec), nil
		}
	}
	return nil, &Error{Kind: ErrInvalidString, Offset: at, Msg: "unpaired surrogate escape " + string(p.data[at:at+6]) + " in a string"}
}

// badUnicode refuses the \u escape whose 'u' is at u (it has no four hex
// digits) at its first offending byte.
func (p *parser) badUnicode(u int) error {
	for i := u + 1; i < u+5; i++ {
		if i >= len(p.data) {
			return p.errEnd()
		}
		if _, ok := hexVal(p.data[i]); !ok {
			p.pos = i
			return p.unexpected("in \\u hexadecimal character escape")
		}
	}
	p.pos = u
	return p.unexpected("in \\u hexadecimal character escape")
}

// hex4 reads four hex digits at i.
func (p *parser) hex4(i int) (rune, bool) {
	if i+4 > len(p.data) {
		return 0, false
	}
	var r rune
	for _, c := range p.data[i : i+4] {
		v, ok := hexVal(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | v
	}
	return r, true
}

func hexVal(c byte) (rune, bool) {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0'), true
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10, true
	}
	return 0, false
}

// unescape returns the byte a one-character string escape (the letter
// after the backslash: \n, \", …) stands for; false for \u and for what
// is no escape.
func unescape(e byte) (byte, bool) {
	switch e {
	case '"', '\\', '/':
		return e, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}

// invalidUTF8 refuses the string s, which began at offset start, at its
// first byte that is not UTF-8.
func invalidUTF8(s []byte, start int) error {
	at := start
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		if r == utf8.RuneError && size == 1 {
			break
		}
		s, at = s[size:], at+size
	}
	return &Error{Kind: ErrInvalidString, Offset: at, Msg: "invalid UTF-8 in a string"}
}
