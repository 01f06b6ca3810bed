package policystore

import (
	"fmt"
	"strings"
)

// diffContext is the lines of context around each change.
const diffContext = 3

// maxDiffEdits bounds the edit distance Diff searches for; beyond it the
// differing middle of the two texts is shown as removed and added whole
// (still a correct diff, only not a minimal one). It keeps Diff's time
// and memory bounded for two unrelated 1 MiB documents.
const maxDiffEdits = 2000

// Diff returns the unified diff (diff -u, three lines of context) that
// turns a into b, with the file names aName and bName; "" when they are
// equal. Lines are compared exactly; a last line without a newline is
// marked as diff does.
func Diff(aName, bName string, a, b []byte) string {
	if string(a) == string(b) {
		return ""
	}
	x, y := splitLines(string(a)), splitLines(string(b))
	ops := lineDiff(x, y)
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", aName, bName)
	for _, h := range hunks(ops) {
		writeHunk(&sb, ops[h[0]:h[1]])
	}
	return sb.String()
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// op is one line of an edit script: ' ' kept, '-' removed, '+' added,
// with the number of lines of a and of b before it.
type op struct {
	kind       byte
	text       string
	aIdx, bIdx int
	noEOL      bool
}

// lineDiff returns an edit script from x to y: the common prefix and
// suffix are kept, the middle is a shortest edit script (Myers) when its
// distance is within maxDiffEdits, else removed and added whole.
func lineDiff(x, y []string) []op {
	pre := 0
	for pre < len(x) && pre < len(y) && x[pre] == y[pre] {
		pre++
	}
	suf := 0
	for suf < len(x)-pre && suf < len(y)-pre && x[len(x)-1-suf] == y[len(y)-1-suf] {
		suf++
	}
	mx, my := x[pre:len(x)-suf], y[pre:len(y)-suf]
	var mid []byte // edit kinds for the middle
	if m := myers(mx, my); m != nil {
		mid = m
	} else {
		mid = append([]byte(strings.Repeat("-", len(mx))), strings.Repeat("+", len(my))...)
	}
	ops := make([]op, 0, pre+len(mid)+suf)
	i, j := 0, 0
	add := func(kind byte) {
		o := op{kind: kind, aIdx: i, bIdx: j}
		switch kind {
		case ' ':
			o.text = x[i]
			o.noEOL = i == len(x)-1 && !strings.HasSuffix(x[i], "\n")
			i++
			j++
		case '-':
			o.text = x[i]
			o.noEOL = i == len(x)-1 && !strings.HasSuffix(x[i], "\n")
			i++
		case '+':
			o.text = y[j]
			o.noEOL = j == len(y)-1 && !strings.HasSuffix(y[j], "\n")
			j++
		}
		ops = append(ops, o)
	}
	for range pre {
		add(' ')
	}
	for _, k := range mid {
		add(k)
	}
	for range suf {
		add(' ')
	}
	return ops
}

// myers returns the kinds (' ', '-', '+') of a shortest edit script from
// a to b, nil when it needs more than maxDiffEdits edits.
func myers(a, b []string) []byte {
	n, m := len(a), len(b)
	maxD := min(n+m, maxDiffEdits)
	off := maxD + 1
	v := make([]int, 2*maxD+3)
	var trace [][]int
	for d := 0; d <= maxD; d++ {
		trace = append(trace, append([]int(nil), v[off-d-1:off+d+2]...))
		for k := -d; k <= d; k += 2 {
			var xx int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				xx = v[off+k+1]
			} else {
				xx = v[off+k-1] + 1
			}
			yy := xx - k
			for xx < n && yy < m && a[xx] == b[yy] {
				xx++
				yy++
			}
			v[off+k] = xx
			if xx >= n && yy >= m {
				return backtrack(trace, n, m)
			}
		}
	}
	return nil
}

// backtrack walks the saved frontiers back from (n, m). trace[d] holds
// v[-d-1 .. d+1] as it was before step d.
func backtrack(trace [][]int, n, m int) []byte {
	var out []byte
	xx, yy := n, m
	for d := len(trace) - 1; d > 0; d-- {
		v := trace[d]
		at := func(k int) int { return v[k+d+1] }
		k := xx - yy
		var pk int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := at(pk)
		py := px - pk
		for xx > px && yy > py {
			out = append(out, ' ')
			xx--
			yy--
		}
		if xx == px {
			out = append(out, '+')
		} else {
			out = append(out, '-')
		}
		xx, yy = px, py
	}
	for xx > 0 && yy > 0 {
		out = append(out, ' ')
		xx--
		yy--
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// hunks groups the changes of ops with their context: [start, end) index
// ranges of ops.
func hunks(ops []op) [][2]int {
	var out [][2]int
	for i := 0; i < len(ops); i++ {
		if ops[i].kind == ' ' {
			continue
		}
		start := max(0, i-diffContext)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			// A run of kept lines: the hunk ends unless another change
			// follows within twice the context.
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*diffContext {
				end = min(end+diffContext, len(ops))
				break
			}
			end = run
		}
		if n := len(out); n > 0 && start < out[n-1][1] {
			start = out[n-1][1]
		}
		out = append(out, [2]int{start, end})
		i = end - 1
	}
	return out
}

func writeHunk(sb *strings.Builder, ops []op) {
	aN, bN := 0, 0
	for _, o := range ops {
		if o.kind != '+' {
			aN++
		}
		if o.kind != '-' {
			bN++
		}
	}
	// A side with no line in the hunk is numbered by the line before it
	// (diff's convention).
	aStart, bStart := ops[0].aIdx, ops[0].bIdx
	if aN > 0 {
		aStart++
	}
	if bN > 0 {
		bStart++
	}
	fmt.Fprintf(sb, "@@ -%s +%s @@\n", hunkRange(aStart, aN), hunkRange(bStart, bN))
	for _, o := range ops {
		sb.WriteByte(o.kind)
		sb.WriteString(strings.TrimSuffix(o.text, "\n"))
		sb.WriteByte('\n')
		if o.noEOL {
			sb.WriteString("\\ No newline at end of file\n")
		}
	}
}

func hunkRange(start, n int) string {
	if n == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}
