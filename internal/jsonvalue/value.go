package jsonvalue

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Doc is one JSON text, parsed once (Parse), and the forms its users
// derive from it, each at most once and only when asked for: the schema
// form (Schema), the native form (Native), the canonical text
// (Canonical) and its SHA-256 (SHA256). A Doc is immutable and safe for
// concurrent use; no form it returns may be modified.
type Doc struct {
	raw    []byte
	schema any

	nativeOnce sync.Once
	native     any

	canonicalOnce sync.Once
	canonical     []byte
	sum           [sha256.Size]byte
}

// Parse parses one JSON text by the rules of doc.go ("Rules"): it returns
// the *Error (ErrSyntax, ErrInvalidString, ErrNumberRange, ErrTooDeep) or
// *DuplicateKeyError (ErrDuplicateKey) of the first thing it refuses. The
// Doc keeps raw (Raw): the caller must not modify it afterwards.
func Parse(raw []byte) (d *Doc, err error) {
	// Small enough to inline: a caller that keeps no pointer to the Doc
	// (registry.ValidateArgs) has it on its stack.
	v, err := parse(raw)
	if err == nil {
		d = &Doc{raw: raw, schema: v}
	}
	return d, err
}

// Raw returns the text the Doc was parsed from (not a copy).
func (d *Doc) Raw() []byte { return d.raw }

// Schema returns the schema form: objects are map[string]any, arrays
// []any, numbers json.Number (their text, as written), strings string,
// true and false bool, null nil — what jsonschema.UnmarshalJSON returns
// for the same text. It is built by Parse.
func (d *Doc) Schema() any { return d.schema }

// Object returns the schema form when the text is an object, and false
// otherwise.
func (d *Doc) Object() (map[string]any, bool) {
	m, ok := d.schema.(map[string]any)
	return m, ok
}

// Native returns the native form: the schema form with every number an
// int64 when it is whole and fits, else a float64 (±Inf beyond its range,
// 0 below it). Arrays and objects that hold no number anywhere are the
// schema form's own.
func (d *Doc) Native() any {
	d.nativeOnce.Do(func() { d.native, _ = nativeValue(d.schema) })
	return d.native
}

// Canonical returns the canonical text (doc.go, "The canonical form").
func (d *Doc) Canonical() []byte {
	d.canonicalOnce.Do(d.makeCanonical)
	return d.canonical
}

// SHA256 returns the SHA-256 of Canonical.
func (d *Doc) SHA256() [sha256.Size]byte {
	d.canonicalOnce.Do(d.makeCanonical)
	return d.sum
}

func (d *Doc) makeCanonical() {
	w := canonicalWriter{out: make([]byte, 0, len(d.raw))}
	w.value(d.schema)
	d.canonical = w.out
	d.sum = sha256.Sum256(w.out)
}

// nativeValue returns the native form of a schema-form value, and whether
// it differs from v (v holds a number).
func nativeValue(v any) (any, bool) {
	switch v := v.(type) {
	case json.Number:
		return nativeNumber(string(v)), true
	case map[string]any:
		var out map[string]any
		for k, e := range v {
			if n, changed := nativeValue(e); changed {
				if out == nil {
					out = maps.Clone(v)
				}
				out[k] = n
			}
		}
		if out == nil {
			return v, false
		}
		return out, true
	case []any:
		var out []any
		for i, e := range v {
			if n, changed := nativeValue(e); changed {
				if out == nil {
					out = slices.Clone(v)
				}
				out[i] = n
			}
		}
		if out == nil {
			return v, false
		}
		return out, true
	}
	return v, false
}

// nativeNumber returns the native value of a number's text: int64 when it
// is whole and fits, else float64.
func nativeNumber(text string) any {
	if !strings.ContainsAny(text, ".eE") {
		if i, err := strconv.ParseInt(text, 10, 64); err == nil {
			return i
		}
	}
	var buf [32]byte
	canon := appendCanonicalNumber(buf[:0], text)
	if !bytes.ContainsAny(canon, ".e") {
		if i, err := strconv.ParseInt(string(canon), 10, 64); err == nil {
			return i
		}
	}
	f, _ := strconv.ParseFloat(string(canon), 64) // ±Inf on overflow, 0 on underflow
	return f
}
