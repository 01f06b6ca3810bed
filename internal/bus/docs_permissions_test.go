package bus_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
)

// The NATS permission table of docs/reliability.md lists, for prefix
// toolwire, exactly the subjects RolePermissions gives each role: the doc
// cannot drift from the code's lists.
func TestDocsPermissionTable(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/reliability.md")
	require.NoError(t, err)
	c := bus.Config{Prefix: "toolwire"}.WithDefaults()
	var layout []string
	for _, s := range c.Stores() {
		layout = append(layout, s.Stream)
	}
	doc, err := parsePermissionTable(string(b), "alpha", layout)
	require.NoError(t, err)

	for _, role := range []string{bus.RoleWorker, bus.PoolRole("alpha"), bus.RoleOperator} {
		code, err := bus.RolePermissions(c, role)
		require.NoError(t, err)
		for _, dir := range []struct {
			name      string
			code, doc []string
		}{
			{"pub", code.Publish, doc[role].Publish},
			{"sub", code.Subscribe, doc[role].Subscribe},
		} {
			notInDoc, notInCode := missing(dir.code, dir.doc), missing(dir.doc, dir.code)
			if len(notInDoc) > 0 || len(notInCode) > 0 {
				t.Errorf("role %s, %s: in the code but not the doc: %q; in the doc but not the code: %q",
					role, dir.name, notInDoc, notInCode)
			}
		}
	}
}

// missing returns what of want is not in have, sorted.
func missing(want, have []string) []string {
	var out []string
	for _, s := range want {
		if !slices.Contains(have, s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// parsePermissionTable reads the table under "### NATS permission table"
// of doc into each role's permissions, for pool name pool (a role cell's
// "pool-&lt;name&gt;", a subject's "<name>"). Its rows are
//
//	| role[, role] | pub …; sub … | for | rests on |
//
// The subjects of an "allowed" cell are its code spans with a dot in them,
// but those in parentheses (references to the code).
// A placeholder is defined in a cell, for that row and those below, by
// "`<x>` each of `a`, `b` and `c`" ("`a_0` … `a_7`" for a range) or by
// "`<x>` each stream and bucket of the layout" (layout), but the code spans
// that follow; a subject stands for one subject per value of each of its
// placeholders. Rows of "dispatcher only" are no role's.
func parsePermissionTable(doc, pool string, layout []string) (map[string]bus.Permissions, error) {
	_, table, ok := strings.Cut(doc, "\n### NATS permission table\n")
	if !ok {
		return nil, errors.New(`no "### NATS permission table" section`)
	}
	roles := map[string]string{"worker": bus.RoleWorker, "operator": bus.RoleOperator, "pool-&lt;name&gt;": bus.PoolRole(pool)}
	perms := map[string]bus.Permissions{}
	defs := map[string][]string{}
	rows := 0
	for _, line := range strings.Split(table, "\n")[1:] {
		if rows > 0 && !strings.HasPrefix(line, "| ") {
			break // the end of the table
		}
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| role |") {
			continue // the prose before the table, and its header
		}
		rows++
		cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "| "), " |"), " | ")
		if len(cells) != 4 {
			return nil, fmt.Errorf("row %d has %d cells, want 4: %s", rows, len(cells), line)
		}
		if cells[0] == "dispatcher only" {
			continue
		}
		pub, sub, err := parseAllowed(strings.ReplaceAll(cells[1], "<name>", pool), defs, layout)
		if err != nil {
			return nil, fmt.Errorf("row %d (%s): %w", rows, cells[0], err)
		}
		for _, name := range strings.Split(cells[0], ", ") {
			role, ok := roles[name]
			if !ok {
				return nil, fmt.Errorf("row %d: unknown role %q", rows, name)
			}
			p := perms[role]
			p.Publish = append(p.Publish, pub...)
			p.Subscribe = append(p.Subscribe, sub...)
			perms[role] = p
		}
	}
	if rows == 0 {
		return nil, errors.New("the permission table has no rows")
	}
	return perms, nil
}

// parseAllowed returns the subjects of an "allowed" cell, whose parts,
// separated by "; ", each start with "pub" or "sub". It adds the
// placeholders the cell defines to defs.
func parseAllowed(cell string, defs map[string][]string, layout []string) (pub, sub []string, err error) {
	for _, part := range strings.Split(cell, "; ") {
		subjects, err := parsePart(part, defs, layout)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case strings.HasPrefix(part, "pub"):
			pub = append(pub, subjects...)
		case strings.HasPrefix(part, "sub"):
			sub = append(sub, subjects...)
		default:
			return nil, nil, fmt.Errorf("%q starts with neither pub nor sub", part)
		}
	}
	return pub, sub, nil
}

// parsePart returns the subjects of one part of an "allowed" cell,
// placeholders expanded (see parsePermissionTable).
func parsePart(part string, defs map[string][]string, layout []string) ([]string, error) {
	pieces := strings.Split(part, "`") // code spans at odd indexes
	var subjects []string
	defining, fromLayout := "", false // the placeholder whose values follow
	for i := 1; i < len(pieces); i += 2 {
		span, before, after := pieces[i], pieces[i-1], pieces[i+1]
		switch {
		case strings.HasSuffix(before, "(") && strings.HasPrefix(after, ")"):
			// A reference to the code ("(`bus.ScanConsumer`)").
		case strings.Contains(span, "."):
			defining = ""
			subjects = append(subjects, span)
		case isPlaceholder(span) && strings.HasPrefix(after, " each of "):
			defining, fromLayout = span, false
			defs[span] = nil
		case isPlaceholder(span) && strings.HasPrefix(after, " each stream and bucket of the layout"):
			defining, fromLayout = span, true
			defs[span] = slices.Clone(layout)
		case isPlaceholder(span):
			// A placeholder named in prose ("the same five `<p>`").
		case defining != "" && fromLayout:
			if !slices.Contains(defs[defining], span) {
				return nil, fmt.Errorf("%s: %q, named as an exception, is no stream of the layout", defining, span)
			}
			defs[defining] = slices.DeleteFunc(defs[defining], func(s string) bool { return s == span })
		case defining != "" && strings.TrimSpace(before) == "…":
			values, err := valueRange(defs[defining], span)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", defining, err)
			}
			defs[defining] = append(defs[defining], values...)
		case defining != "":
			defs[defining] = append(defs[defining], span)
		default:
			return nil, fmt.Errorf("`%s` is neither a subject nor a placeholder's value", span)
		}
	}
	var out []string
	for _, s := range subjects {
		expanded, err := expand(s, defs)
		if err != nil {
			return nil, err
		}
		out = append(out, expanded...)
	}
	return out, nil
}

func isPlaceholder(span string) bool {
	return strings.HasPrefix(span, "<") && strings.HasSuffix(span, ">")
}

// valueRange returns the values after the last of values up to last, for
// "`a_0` … `a_7`": both end in a number after the same text.
func valueRange(values []string, last string) ([]string, error) {
	if len(values) == 0 {
		return nil, fmt.Errorf("a range … %q without a first value", last)
	}
	first := values[len(values)-1]
	cut := strings.LastIndexFunc(first, func(r rune) bool { return r < '0' || r > '9' }) + 1
	stem := first[:cut]
	from, err := strconv.Atoi(first[cut:])
	if err != nil {
		return nil, fmt.Errorf("%q … %q: the first is not numbered: %w", first, last, err)
	}
	rest, ok := strings.CutPrefix(last, stem)
	to, err := strconv.Atoi(rest)
	if !ok || err != nil || to <= from {
		return nil, fmt.Errorf("%q … %q: the last is not a later number after %q", first, last, stem)
	}
	var out []string
	for n := from + 1; n <= to; n++ {
		out = append(out, first[:cut]+strconv.Itoa(n))
	}
	return out, nil
}

// expand returns subject once per value of each placeholder in it.
func expand(subject string, defs map[string][]string) ([]string, error) {
	start := strings.Index(subject, "<")
	if start < 0 {
		return []string{subject}, nil
	}
	end := strings.Index(subject[start:], ">")
	if end < 0 {
		return nil, fmt.Errorf("subject %q: an unclosed placeholder", subject)
	}
	name := subject[start : start+end+1]
	values, ok := defs[name]
	if !ok {
		return nil, fmt.Errorf("subject %q: placeholder %s is defined nowhere above it", subject, name)
	}
	var out []string
	for _, v := range values {
		expanded, err := expand(strings.ReplaceAll(subject, name, v), defs)
		if err != nil {
			return nil, err
		}
		out = append(out, expanded...)
	}
	return out, nil
}
