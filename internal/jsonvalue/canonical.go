package jsonvalue

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// canonicalWriter writes the canonical text of a schema-form value.
type canonicalWriter struct {
	out []byte
}

// member is one member of an object being written.
type member struct {
	key string
	v   any
}

func (w *canonicalWriter) value(v any) {
	switch v := v.(type) {
	case nil:
		w.out = append(w.out, "null"...)
	case bool:
		w.out = strconv.AppendBool(w.out, v)
	case string:
		w.out = appendCanonicalString(w.out, v)
	case json.Number:
		w.out = appendCanonicalNumber(w.out, string(v))
	case []any:
		w.out = append(w.out, '[')
		for i, e := range v {
			if i > 0 {
				w.out = append(w.out, ',')
			}
			w.value(e)
		}
		w.out = append(w.out, ']')
	case map[string]any:
		w.object(v)
	}
}

// object writes m with its members sorted by the bytes of their keys.
func (w *canonicalWriter) object(m map[string]any) {
	var small [8]member // most objects: no allocation
	ms := small[:0]
	if len(m) > len(small) {
		ms = make([]member, 0, len(m))
	}
	for k, v := range m {
		ms = append(ms, member{k, v})
	}
	sortMembers(ms)
	w.out = append(w.out, '{')
	for i, m := range ms {
		if i > 0 {
			w.out = append(w.out, ',')
		}
		w.out = appendCanonicalString(w.out, m.key)
		w.out = append(w.out, ':')
		w.value(m.v)
	}
	w.out = append(w.out, '}')
}

// sortMembers sorts ms by key: an insertion sort for the few members most
// objects have, slices.SortFunc beyond.
func sortMembers(ms []member) {
	if len(ms) > 12 {
		slices.SortFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
		return
	}
	for i := 1; i < len(ms); i++ {
		for j := i; j > 0 && ms[j].key < ms[j-1].key; j-- {
			ms[j], ms[j-1] = ms[j-1], ms[j]
		}
	}
}

// appendCanonicalString appends s as a canonical JSON string: only `"`,
// `\` and control characters escaped, as \b \f \n \r \t or \u00xx.
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

// decimal is a number as significant digits (no leading or trailing
// zeros; none for zero) times ten to exp.
type decimal struct {
	neg    bool
	digits []byte
	exp    int64
}

// parseDecimal decomposes the text of a number in JSON's grammar whose
// exponent Parse accepted (at most nine significant digits); its digits
// are appended to buf.
func parseDecimal(text string, buf []byte) decimal {
	var d decimal
	if strings.HasPrefix(text, "-") {
		d.neg, text = true, text[1:]
	}
	mant := text
	if k := strings.IndexAny(text, "eE"); k >= 0 {
		mant = text[:k]
		d.exp, _ = strconv.ParseInt(strings.TrimPrefix(text[k+1:], "+"), 10, 64)
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := append(append(buf, intPart...), frac...)
	d.exp -= int64(len(frac))
	for len(digits) > 0 && digits[0] == '0' {
		digits = digits[1:]
	}
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		d.exp++
	}
	d.digits = digits
	return d
}

// appendCanonicalNumber appends the canonical form of the JSON number
// text (doc.go, "The canonical form").
func appendCanonicalNumber(dst []byte, text string) []byte {
	var buf [32]byte
	d := parseDecimal(text, buf[:0])
	if len(d.digits) == 0 {
		return append(dst, '0')
	}
	if d.neg {
		dst = append(dst, '-')
	}
	// n is the position of the decimal point relative to the digits'
	// start: value = 0.digits × 10^n.
	n := int64(len(d.digits)) + d.exp
	switch {
	case d.exp >= 0 && n <= 21:
		dst = append(dst, d.digits...)
		for range d.exp {
			dst = append(dst, '0')
		}
	case n > 0 && n <= 21:
		dst = append(dst, d.digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, d.digits[n:]...)
	case n > -6 && n <= 0:
		dst = append(dst, "0."...)
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, d.digits...)
	default:
		dst = append(dst, d.digits[0])
		if len(d.digits) > 1 {
			dst = append(dst, '.')
			dst = append(dst, d.digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, n-1, 10)
	}
	return dst
}

// AppendCanonical appends the canonical text of v, a value in the schema
// form (Doc.Schema, or a part of it), to dst.
func AppendCanonical(dst []byte, v any) []byte {
	w := canonicalWriter{out: dst}
	w.value(v)
	return w.out
}
