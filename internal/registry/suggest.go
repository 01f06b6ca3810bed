package registry

import (
	"slices"
	"strings"
	"unicode"
)

// Similar returns up to three of names that look like a misspelling of
// name, closest first: an edit distance of at most a third of its length
// (at least 2), case, "_" and "-" ignored, or one name containing the
// other (an MCP tool's short name: everything_add for
// mcp__everything__add).
func Similar(name string, names []string) []string {
	type cand struct {
		name string
		dist int
	}
	lower := normalName(name)
	limit := max(2, len(lower)/3)
	var out []cand
	for _, n := range names {
		ln := normalName(n)
		d := editDistance(lower, ln, limit)
		if d > limit && len(lower) >= 3 && (strings.Contains(ln, lower) || strings.Contains(lower, ln)) {
			d = limit
		}
		if d <= limit && n != name {
			out = append(out, cand{n, d})
		}
	}
	slices.SortStableFunc(out, func(a, b cand) int { return a.dist - b.dist })
	res := make([]string, 0, 3)
	for _, c := range out[:min(len(out), 3)] {
		res = append(res, c.name)
	}
	return res
}

// editDistance is the Levenshtein distance of a and b, or limit+1 as soon
// as it must exceed limit.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		best := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			best = min(best, cur[j])
		}
		if best > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// normalName is name in lower case without "_" and "-".
func normalName(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' {
			return -1
		}
		return unicode.ToLower(r)
	}, name)
}
