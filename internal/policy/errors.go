package policy

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrInvalid is matched (errors.Is) by every *InvalidError: Parse refused
// the document.
var ErrInvalid = errors.New("policy: invalid document")

// Problem is one thing wrong with a policy document.
type Problem struct {
	// Line is the 1-based line of the document it is at; 0 when the
	// problem is not at one place (the document is too large, empty).
	Line int
	// Field is where in the document: "tenant.rules[2].when",
	// "agents.support-bot.default", "tests[0].expect"; "" for the whole.
	Field string
	// Msg says what is wrong.
	Msg string
}

// String renders "line 12: tenant.rules[2].when: msg".
func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// InvalidError lists the problems that made Parse refuse a document, in
// line order. It matches ErrInvalid.
type InvalidError struct {
	Problems []Problem
}

// maxProblemsShown bounds the problems Error names.
const maxProblemsShown = 20

// Error names every problem (at most 20, then how many more).
func (e *InvalidError) Error() string {
	parts := make([]string, 0, min(len(e.Problems), maxProblemsShown)+1)
	for i, p := range e.Problems {
		if i == maxProblemsShown {
			parts = append(parts, fmt.Sprintf("and %d more", len(e.Problems)-i))
			break
		}
		parts = append(parts, p.String())
	}
	return "policy: invalid document: " + strings.Join(parts, "; ")
}

// Is reports whether target is ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// problems collects the problems of one document.
type problems []Problem

func (ps *problems) add(line int, field, format string, args ...any) {
	*ps = append(*ps, Problem{Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// err returns the *InvalidError of the problems, nil when there are none.
func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	sorted := slices.Clone(ps)
	slices.SortStableFunc(sorted, func(a, b Problem) int { return cmp.Compare(a.Line, b.Line) })
	return &InvalidError{Problems: sorted}
}
