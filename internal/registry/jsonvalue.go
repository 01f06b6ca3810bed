package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// parseJSON parses one JSON document into the values JSON Schema
// validation works on: map[string]any, []any, string, json.Number, bool and
// nil — exactly what jsonschema.UnmarshalJSON (encoding/json with
// UseNumber) returns for the same bytes, and an error where it returns
// one (FuzzParseJSON holds the two together). It exists because admission
// validates every call: the decoder behind UnmarshalJSON costs a reader, a
// buffer and a scanner per document, about twice this.
//
// As encoding/json does, invalid UTF-8 in a string becomes U+FFFD per
// byte and a lone surrogate escape U+FFFD. Unlike it, an object that
// repeats a key (after unescaping) is an error, a *DuplicateKeyError, at
// every nesting level: with "last wins" a validator and a tool that reads
// the first occurrence could see different arguments.
func parseJSON(data []byte) (any, error) {
	p := jsonParser{data: data}
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

// maxJSONDepth is encoding/json's nesting limit. Admission refuses
// arguments nested deeper than its own (much lower) limit first.
const maxJSONDepth = 10000

var errJSONEnd = errors.New("unexpected end of JSON input")

// DuplicateKeyError reports an object that repeats a key.
type DuplicateKeyError struct {
	// Pointer is the JSON Pointer of the repeated member, e.g. "/a/0/path".
	Pointer string
	// Key is the repeated key.
	Key string
}

func (e *DuplicateKeyError) Error() string {
	return fmt.Sprintf("duplicate key %q at %s", e.Key, e.Pointer)
}

// within prefixes the pointer of a duplicate found inside a member; other
// errors pass through. It runs only on the error path.
func within(err error, token string) error {
	var dup *DuplicateKeyError
	if errors.As(err, &dup) {
		dup.Pointer = "/" + escape(token) + dup.Pointer
	}
	return err
}

type jsonParser struct {
	data []byte
	pos  int
}

func (p *jsonParser) space() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) unexpected(context string) error {
	if p.pos >= len(p.data) {
		return errJSONEnd
	}
	return fmt.Errorf("invalid character %s %s (offset %d)", quoteByte(p.data[p.pos]), context, p.pos)
}

func quoteByte(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	if c >= utf8.RuneSelf {
		s = strconv.Quote(string([]byte{c}))
	}
	return "'" + s[1:len(s)-1] + "'"
}

func (p *jsonParser) value(depth int) (any, error) {
	if p.pos >= len(p.data) {
		return nil, errJSONEnd
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		return p.string()
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

func (p *jsonParser) literal(word string) error {
	for i := range len(word) {
		if p.pos >= len(p.data) {
			return errJSONEnd
		}
		if p.data[p.pos] != word[i] {
			return p.unexpected("in literal " + word)
		}
		p.pos++
	}
	return nil
}

func (p *jsonParser) object(depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, errors.New("exceeded max depth")
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
			return nil, errJSONEnd
		}
		if p.data[p.pos] != '"' {
			return nil, p.unexpected("looking for beginning of object key string")
		}
		k, err := p.string()
		if err != nil {
			return nil, err
		}
		p.space()
		if p.pos >= len(p.data) {
			return nil, errJSONEnd
		}
		if p.data[p.pos] != ':' {
			return nil, p.unexpected("after object key")
		}
		p.pos++
		p.space()
		v, err := p.value(depth)
		if err != nil {
			return nil, within(err, k.(string))
		}
		n := len(m)
		m[k.(string)] = v
		if len(m) == n {
			return nil, &DuplicateKeyError{Pointer: "/" + escape(k.(string)), Key: k.(string)}
		}
		if more, err := p.more('}', "after object key:value pair"); !more || err != nil {
			return m, err
		}
	}
}

// more reads what follows a member of an object or array: a comma (true)
// or its closing bracket (false).
func (p *jsonParser) more(closing byte, context string) (bool, error) {
	p.space()
	if p.pos >= len(p.data) {
		return false, errJSONEnd
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

func (p *jsonParser) array(depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, errors.New("exceeded max depth")
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
func (p *jsonParser) number() (any, error) {
	start := p.pos
	if p.data[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos >= len(p.data):
		return nil, errJSONEnd
	case p.data[p.pos] == '0':
		p.pos++
	case p.data[p.pos] >= '1' && p.data[p.pos] <= '9':
		p.digits()
	default:
		return nil, p.unexpected("in numeric literal")
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if !p.digits() {
			return nil, p.unexpected("after decimal point in numeric literal")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if !p.digits() {
			return nil, p.unexpected("in exponent of numeric literal")
		}
	}
	return json.Number(p.data[start:p.pos]), nil
}

// digits skips a run of digits and reports whether there was one.
func (p *jsonParser) digits() bool {
	start := p.pos
	for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
		p.pos++
	}
	return p.pos > start
}

// string reads a string literal. Without escapes or invalid UTF-8 it is
// one allocation.
func (p *jsonParser) string() (any, error) {
	p.pos++ // "
	start := p.pos
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			s := p.data[start:p.pos]
			p.pos++
			if utf8.Valid(s) {
				return string(s), nil
			}
			return string(fixUTF8(s)), nil
		case c == '\\':
			return p.escaped(start)
		case c < 0x20:
			return nil, p.unexpected("in string literal")
		}
		p.pos++
	}
	return nil, errJSONEnd
}

// escaped finishes a string with escapes, which began at start.
func (p *jsonParser) escaped(start int) (any, error) {
	b := make([]byte, 0, p.pos-start+16)
	b = append(b, p.data[start:p.pos]...)
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			if utf8.Valid(b) {
				return string(b), nil
			}
			return string(fixUTF8(b)), nil
		case c < 0x20:
			return nil, p.unexpected("in string literal")
		case c != '\\':
			b = append(b, c)
			p.pos++
			continue
		}
		p.pos++ // backslash
		if p.pos >= len(p.data) {
			return nil, errJSONEnd
		}
		e := p.data[p.pos]
		if c, ok := JSONEscape(e); ok {
			b = append(b, c)
			p.pos++
			continue
		}
		switch e {
		case 'u':
			r, ok := p.hex4(p.pos + 1)
			if !ok {
				return nil, p.badUnicode()
			}
			p.pos += 4
			if utf16.IsSurrogate(r) {
				// A pair only if a low surrogate escape follows at once.
				if p.pos+2 < len(p.data) && p.data[p.pos+1] == '\\' && p.data[p.pos+2] == 'u' {
					if r2, ok := p.hex4(p.pos + 3); ok {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							b = utf8.AppendRune(b, dec)
							p.pos += 7
							continue
						}
					}
				}
				r = utf8.RuneError
			}
			b = utf8.AppendRune(b, r)
		default:
			return nil, p.unexpected("in string escape code")
		}
		p.pos++
	}
	return nil, errJSONEnd
}

// badUnicode reports a \u escape without four hex digits at the first
// offending byte.
func (p *jsonParser) badUnicode() error {
	for i := p.pos + 1; i < p.pos+5; i++ {
		if i >= len(p.data) {
			p.pos = len(p.data)
			return errJSONEnd
		}
		if _, ok := hexVal(p.data[i]); !ok {
			p.pos = i
			return p.unexpected("in \\u hexadecimal character escape")
		}
	}
	return p.unexpected("in \\u hexadecimal character escape")
}

// hex4 reads four hex digits at i.
func (p *jsonParser) hex4(i int) (rune, bool) {
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

// fixUTF8 replaces each byte of invalid UTF-8 with U+FFFD, as
// encoding/json does.
func fixUTF8(s []byte) []byte {
	out := make([]byte, 0, len(s)+8)
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		if r == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, s[:size]...)
		}
		s = s[size:]
	}
	return out
}

// JSONEscape returns the byte a one-character JSON string escape (\n,
// \", …: the letter after the backslash) stands for; false for \u and
// for what is no escape.
func JSONEscape(e byte) (byte, bool) {
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
