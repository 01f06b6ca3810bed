package httpexec

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/toolwire/toolwire/internal/redact"
)

// urlTemplate is a parsed url_template: RFC 6570 level 1 (simple string
// expansion, one variable per expression) and nothing else.
type urlTemplate struct {
	parts []urlPart
	// base is the template with every expression expanded to "x": the
	// scheme, host and port never depend on arguments.
	base *url.URL
}

// urlPart is a literal or one {var} expression.
type urlPart struct {
	literal string
	name    string
	// inPath is true for an expression before the query: its value must
	// not be empty, "." or "..", which would change the path's shape.
	inPath bool
}

// parseURLTemplate parses and checks t. Expressions may only appear after
// the authority (in the path or query), so arguments never choose the
// scheme, host, port or user information.
func parseURLTemplate(t string) (*urlTemplate, error) {
	if t == "" {
		return nil, errors.New("url_template is empty")
	}
	ut := &urlTemplate{}
	var probe strings.Builder
	inQuery := false
	firstExpr := -1
	for rest := t; rest != ""; {
		i := strings.IndexAny(rest, "{}")
		if i < 0 {
			ut.addLiteral(rest, &inQuery)
			probe.WriteString(rest)
			break
		}
		if rest[i] == '}' {
			return nil, fmt.Errorf("url_template: unmatched '}' at offset %d", len(t)-len(rest)+i)
		}
		ut.addLiteral(rest[:i], &inQuery)
		probe.WriteString(rest[:i])
		end := strings.IndexByte(rest[i:], '}')
		if end < 0 {
			return nil, fmt.Errorf("url_template: unterminated expression at offset %d", len(t)-len(rest)+i)
		}
		expr := rest[i+1 : i+end]
		if err := checkSimpleExpression(expr); err != nil {
			return nil, fmt.Errorf("url_template: expression {%s}: %w", expr, err)
		}
		if firstExpr < 0 {
			firstExpr = probe.Len()
		}
		ut.parts = append(ut.parts, urlPart{name: expr, inPath: !inQuery})
		probe.WriteString("x")
		rest = rest[i+end+1:]
	}
	u, err := url.Parse(probe.String())
	if err != nil {
		return nil, fmt.Errorf("url_template: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("url_template: scheme %q: want http or https", u.Scheme)
	case u.Opaque != "" || u.Host == "":
		return nil, errors.New("url_template: want an absolute URL with a host (scheme://host/...)")
	case u.Fragment != "" || strings.Contains(t, "#"):
		return nil, errors.New("url_template: a fragment (#...) is never sent; remove it")
	}
	if firstExpr >= 0 {
		authorityEnd := len(u.Scheme) + len("://") + len(u.Host)
		if firstExpr <= authorityEnd {
			return nil, errors.New("url_template: expressions may only appear after the host (in the path or query)")
		}
	}
	ut.base = u
	return ut, nil
}

func (ut *urlTemplate) addLiteral(s string, inQuery *bool) {
	if s == "" {
		return
	}
	if strings.Contains(s, "?") {
		*inQuery = true
	}
	ut.parts = append(ut.parts, urlPart{literal: s})
}

// checkSimpleExpression accepts only a bare variable name.
func checkSimpleExpression(expr string) error {
	if expr == "" {
		return errors.New("empty expression")
	}
	if strings.ContainsRune("+#./;?&=,!@|", rune(expr[0])) {
		return fmt.Errorf("operator %q is not supported: only simple {name} expansion", expr[0])
	}
	if strings.Contains(expr, ",") {
		return errors.New("variable lists are not supported: one variable per expression")
	}
	if strings.ContainsAny(expr, ":*") {
		return errors.New("prefix and explode modifiers are not supported")
	}
	if !validName(expr) {
		return errors.New("a variable name is letters, digits and '_'")
	}
	return nil
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// vars returns the names of the template's variables, in order.
func (ut *urlTemplate) vars() []string {
	var names []string
	for _, p := range ut.parts {
		if p.name != "" {
			names = append(names, p.name)
		}
	}
	return names
}

// expand returns the URL with each expression replaced by its argument,
// percent-encoded so that it stays one segment: every byte except the
// unreserved ALPHA / DIGIT / "-" / "." / "_" / "~" is encoded. A missing
// or null argument is an error in the path and empty in the query.
func (ut *urlTemplate) expand(a *args) (string, error) {
	var b strings.Builder
	for _, p := range ut.parts {
		if p.name == "" {
			b.WriteString(p.literal)
			continue
		}
		v, ok, err := a.scalar(p.name)
		if err != nil {
			return "", err
		}
		if p.inPath {
			switch {
			case !ok:
				return "", argError(p.name, "required by the URL path")
			case v == "" || v == "." || v == "..":
				return "", argError(p.name, fmt.Sprintf("%q cannot be a URL path segment", v))
			}
		}
		b.WriteString(redact.PercentEncode(v))
	}
	return b.String(), nil
}
