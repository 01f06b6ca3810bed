package redact

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// MinLen is the length (in bytes) from which a secret value is replaced
// wherever it appears in a text. A shorter value (a PIN, a one-letter
// password) cannot be told apart from ordinary text: replacing "7" or
// "abc" everywhere would garble every message that happens to contain it
// and still show where the value was. Shorter values are replaced only
// where they stand quoted ('v', "v", \"v\"), as error messages quote
// values; in structured output (Plan.Arguments: audit records, dead
// letters) the argument field itself is redacted whatever its length.
const MinLen = 4

// Secrets are the secret values of one call, in every form in which a
// message may carry them. A nil *Secrets redacts nothing; every method is
// safe to call on it and on nil messages, and safe for concurrent use.
type Secrets struct {
	// pairs are (needle, replacement), longest needle first, so that a
	// longer form wins over a shorter one at the same position.
	pairs []string
	// short are the values under MinLen: a JSON string equal to one is
	// redacted (JSON), though they are not replaced inside texts.
	short map[string]bool
	once  sync.Once
	rep   *strings.Replacer
}

func newSecrets(values []string) *Secrets {
	seen := map[string]bool{}
	short := map[string]bool{}
	type pair struct{ old, repl string }
	var ps []pair
	add := func(old, repl string) {
		if old != "" && !seen[old] {
			seen[old] = true
			ps = append(ps, pair{old, repl})
		}
	}
	for _, v := range values {
		if v == "" {
			continue
		}
		for _, f := range forms(v) {
			if len(v) >= MinLen {
				add(f, Redacted)
				continue
			}
			short[f] = true
			add("'"+f+"'", "'"+Redacted+"'")
			add(`"`+f+`"`, `"`+Redacted+`"`)
			add(`\"`+f+`\"`, `\"`+Redacted+`\"`)
		}
	}
	if len(ps) == 0 {
		return nil
	}
	slices.SortStableFunc(ps, func(a, b pair) int { return cmp.Compare(len(b.old), len(a.old)) })
	s := &Secrets{pairs: make([]string, 0, 2*len(ps)), short: short}
	for _, p := range ps {
		s.pairs = append(s.pairs, p.old, p.repl)
	}
	return s
}

// forms returns v and the forms messages carry it in: JSON string escaped
// (with and without HTML escaping, and escaped twice, for JSON inside a
// JSON string), Go-quoted (%q, as net/http quotes URLs), and
// percent-encoded as a query value, a path segment, a path and by the strict
// unreserved-only rule of the http executor's URL templates.
func forms(v string) []string {
	if unreserved(v) { // every form is v itself (the usual token)
		return []string{v}
	}
	out := []string{v}
	add := func(f string) {
		if f != "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	j := jsonInner(v, true)
	add(j)
	add(jsonInner(v, false))
	add(jsonInner(j, false))
	q := strconv.Quote(v)
	add(q[1 : len(q)-1])
	add(url.QueryEscape(v))
	add(url.PathEscape(v))
	add((&url.URL{Path: v}).EscapedPath()) // as url.URL.String writes a path
	add(PercentEncode(v))
	return out
}

// jsonInner returns v JSON-encoded without its quotes.
func jsonInner(v string, escapeHTML bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	_ = enc.Encode(v) // a string always encodes
	s := strings.TrimSuffix(b.String(), "\n")
	return s[1 : len(s)-1]
}

// unreserved reports whether s holds only RFC 3986 unreserved bytes,
// which no escaping changes.
func unreserved(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c == '-' || c == '.' || c == '_' || c == '~' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

const upperhex = "0123456789ABCDEF"

// PercentEncode percent-encodes every byte of s but ALPHA / DIGIT / "-" /
// "." / "_" / "~" (RFC 3986 unreserved): how the http executor puts a
// value into a URL, and so one of the forms a secret is looked for in.
func PercentEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '-' || c == '.' || c == '_' || c == '~' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(upperhex[c>>4])
		b.WriteByte(upperhex[c&15])
	}
	return b.String()
}

// Longest returns the length in bytes of the longest text a secret is
// replaced in (a form, quoted when short), 0 for nil: a text cut anywhere
// holds at most Longest()-1 bytes of an unfinished one at its end.
func (s *Secrets) Longest() int {
	if s == nil {
		return 0
	}
	return len(s.pairs[0]) // longest first
}

// contains reports whether x holds any secret form.
func (s *Secrets) contains(x string) bool {
	if s == nil || x == "" {
		return false
	}
	for i := 0; i < len(s.pairs); i += 2 {
		if strings.Contains(x, s.pairs[i]) {
			return true
		}
	}
	return false
}

// String returns x with every secret form replaced. x is returned as it
// is, without allocating, when it holds none.
func (s *Secrets) String(x string) string {
	if !s.contains(x) {
		return x
	}
	s.once.Do(func() { s.rep = strings.NewReplacer(s.pairs...) })
	return s.rep.Replace(x)
}

// Bytes is String for bytes.
func (s *Secrets) Bytes(b []byte) []byte {
	if s == nil || len(b) == 0 {
		return b
	}
	x := string(b)
	if r := s.String(x); r != x {
		return []byte(r)
	}
	return b
}

// JSON returns the JSON document doc with the secret forms replaced inside
// its strings (keys included) and secret numbers replaced by the string
// Redacted, so that it stays valid JSON. A document that is not JSON is
// redacted as text.
func (s *Secrets) JSON(doc string) string {
	if !s.contains(doc) {
		return doc
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	if dec.Decode(&v) != nil || dec.More() {
		return s.String(doc)
	}
	b, err := json.Marshal(s.value(v))
	if err != nil {
		return s.String(doc)
	}
	return string(b)
}

func (s *Secrets) value(v any) any {
	switch x := v.(type) {
	case string:
		if s.short[x] {
			return Redacted
		}
		return s.String(x)
	case json.Number:
		if r := s.String(x.String()); r != x.String() {
			return Redacted
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[s.String(k)] = s.value(e)
		}
		return out
	case []any:
		for i, e := range x {
			x[i] = s.value(e)
		}
	}
	return v
}
