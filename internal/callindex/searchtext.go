package callindex

import (
	"bytes"
	"unicode/utf8"

	"github.com/toolwire/toolwire/internal/redact"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// resultText is the searchable text of a response, not redacted: its
// error message, its text content, or its structured output when it has
// no text content; at most resultTextScan bytes (cut says it was longer).
func resultText(r *toolwirev1.ToolResponse) (text []byte, cut bool) {
	add := func(s string) {
		if s == "" || cut {
			return
		}
		if len(text) > 0 {
			s = " " + s
		}
		if room := resultTextScan - len(text); len(s) > room {
			s, cut = s[:room], true
		}
		text = append(text, s...)
	}
	add(r.GetError().GetMessage())
	hasText := false
	for _, c := range r.GetContent() {
		if t := c.GetText(); t != nil {
			hasText = true
			add(t.GetText())
		}
	}
	if !hasText {
		add(r.GetStructuredJson())
	}
	return text, cut
}

// redactResult replaces the secret values in a result's text; a text that
// was cut may hold part of a secret, which cannot be found: none then.
func redactResult(sec *redact.Secrets, text []byte, cut bool) []byte {
	if sec == nil {
		return text
	}
	if cut {
		return nil
	}
	return sec.Bytes(text)
}

// lower appends s lowercased to dst, control characters (textSep among
// them) as spaces, up to n bytes (at a character boundary).
func lower(dst, s []byte, n int) []byte {
	ascii := true
	for _, c := range s {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if !ascii {
		s = bytes.ToLower(s)
	}
	for i := 0; i < len(s); {
		c, size := s[i], 1
		if c >= utf8.RuneSelf {
			_, size = utf8.DecodeRune(s[i:])
		}
		if len(dst)+size > n {
			break
		}
		switch {
		case c < ' ' || c == 0x7f:
			dst = append(dst, ' ')
		case 'A' <= c && c <= 'Z':
			dst = append(dst, c+'a'-'A')
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return dst
}

// compose appends a call's search text to dst: its arguments' text, and
// after textSep its result's text; both lowercased already. Arguments
// keep what leaves resultTextMin bytes of result text.
func compose(dst, args, result []byte) []byte {
	if len(result) == 0 {
		return append(dst, cutAt(args, searchTextMax)...)
	}
	a := cutAt(args, searchTextMax-1-min(len(result), resultTextMin))
	dst = append(dst, a...)
	dst = append(dst, textSep)
	return append(dst, cutAt(result, searchTextMax-1-len(a))...)
}

// cutAt is s cut to at most n bytes at a character boundary.
func cutAt(s []byte, n int) []byte {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
