package policystore_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/policystore"
)

func TestDiff(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, a, b, want string
	}{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{"changed line", "a\nb\nc\n", "a\nB\nc\n", "--- x\n+++ y\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"},
		{"from empty", "", "a\nb\n", "--- x\n+++ y\n@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"to empty", "a\n", "", "--- x\n+++ y\n@@ -1 +0,0 @@\n-a\n"},
		{"no newline at end", "a\nb", "a\nb\n", "--- x\n+++ y\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"},
		{"insert in the middle", "1\n2\n3\n4\n5\n6\n7\n8\n", "1\n2\n3\n4\nnew\n5\n6\n7\n8\n",
			"--- x\n+++ y\n@@ -2,6 +2,7 @@\n 2\n 3\n 4\n+new\n 5\n 6\n 7\n"},
		{"two hunks", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "one\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\ntwelve\n",
			"--- x\n+++ y\n@@ -1,4 +1,4 @@\n-1\n+one\n 2\n 3\n 4\n@@ -9,4 +9,4 @@\n 9\n 10\n 11\n-12\n+twelve\n"},
	} {
		require.Equal(t, tt.want, policystore.Diff("x", "y", []byte(tt.a), []byte(tt.b)), tt.name)
	}
}

// Applying the diff to a gives b, for random edits, also past the edit
// bound (where the middle is replaced whole).
func TestDiffPatchesBack(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		n := r.IntN(40)
		if i%50 == 0 {
			n = 3000
		}
		a := make([]string, n)
		for j := range a {
			a[j] = strconv.Itoa(r.IntN(8))
		}
		b := append([]string(nil), a...)
		for range r.IntN(10) + 1 + (n/1000)*2500 {
			switch k := r.IntN(3); {
			case k == 0 && len(b) > 0:
				j := r.IntN(len(b))
				b = append(b[:j], b[j+1:]...)
			case k == 1:
				j := r.IntN(len(b) + 1)
				b = append(b[:j], append([]string{"n" + strconv.Itoa(r.IntN(8))}, b[j:]...)...)
			case len(b) > 0:
				b[r.IntN(len(b))] = "c"
			}
		}
		as, bs := join(a, r.IntN(2) == 0), join(b, r.IntN(2) == 0)
		d := policystore.Diff("a", "b", []byte(as), []byte(bs))
		got, err := patch(as, d)
		require.NoError(t, err, "case %d:\n%s", i, d)
		require.Equal(t, bs, got, "case %d:\n%s", i, d)
	}
}

func join(lines []string, eol bool) string {
	s := strings.Join(lines, "\n")
	if eol && len(lines) > 0 {
		s += "\n"
	}
	return s
}

// patch applies a unified diff to a, checking every context and removed
// line and the hunk headers' counts.
func patch(a, d string) (string, error) {
	if d == "" {
		return a, nil
	}
	src := splitKeep(a)
	lines := splitKeep(d)[2:]
	var out []string
	pos := 0 // lines of src consumed
	for i := 0; i < len(lines); {
		var as, an, bs, bn int
		h := strings.TrimSuffix(lines[i], "\n")
		if _, err := fmt.Sscanf(normalise(h), "@@ -%d,%d +%d,%d @@", &as, &an, &bs, &bn); err != nil {
			return "", fmt.Errorf("header %q: %w", h, err)
		}
		i++
		start := as - 1
		if an == 0 {
			start = as
		}
		out = append(out, src[pos:start]...)
		pos = start
		gotA, gotB := 0, 0
		for i < len(lines) && !strings.HasPrefix(lines[i], "@@") {
			l := lines[i]
			i++
			text := l[1:]
			if i < len(lines) && strings.HasPrefix(lines[i], `\ No newline`) {
				text = strings.TrimSuffix(text, "\n")
				i++
			}
			switch l[0] {
			case ' ', '-':
				if pos >= len(src) || src[pos] != text {
					return "", fmt.Errorf("line %d: want %q", pos+1, text)
				}
				pos++
				gotA++
				if l[0] == ' ' {
					out = append(out, text)
					gotB++
				}
			case '+':
				out = append(out, text)
				gotB++
			}
		}
		if gotA != an || gotB != bn {
			return "", fmt.Errorf("hunk %q has %d/%d lines", h, gotA, gotB)
		}
	}
	out = append(out, src[pos:]...)
	return strings.Join(out, ""), nil
}

// normalise writes "-3" as "-3,1" so one format reads every header.
func normalise(h string) string {
	f := strings.Fields(h)
	for i := 1; i <= 2; i++ {
		if !strings.Contains(f[i], ",") {
			f[i] += ",1"
		}
	}
	return strings.Join(f, " ")
}

func splitKeep(s string) []string {
	if s == "" {
		return nil
	}
	l := strings.SplitAfter(s, "\n")
	if l[len(l)-1] == "" {
		l = l[:len(l)-1]
	}
	return l
}
