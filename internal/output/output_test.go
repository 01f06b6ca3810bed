package output_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/output"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func TestText(t *testing.T) {
	t.Parallel()
	resp := &toolwirev1.ToolResponse{Content: []*toolwirev1.Content{
		tool.Text("a"), tool.Image([]byte{1}, "image/png"), tool.Text("b\n"), tool.Text("c"),
	}, StructuredJson: `{"x":1}`}
	require.Equal(t, "a\nb\n\nc", output.Text(resp))
	require.Equal(t, `{"x":1}`, output.Text(&toolwirev1.ToolResponse{StructuredJson: `{"x":1}`}), "no text block: the structured JSON")
	require.Empty(t, output.Text(nil))
	for s, n := range map[string]int64{"": 0, "a": 1, "a\n": 1, "a\nb": 2, "\n": 1, "\n\n": 2} {
		require.Equal(t, n, output.Lines(s), "%q", s)
	}
}

// Every range of a text with characters of 1 to 4 bytes is on character
// boundaries, within its limit, and the ranges read on from each other
// give the whole text back.
func TestReadKeepsCharactersWhole(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("aé€😀\n", 300)
	for _, limit := range []int64{4, 5, 7, 100, 1000} {
		var got strings.Builder
		var offset int64
		for {
			r, err := output.Read(t.Context(), strings.NewReader(text), offset, limit)
			require.NoError(t, err)
			require.Equal(t, offset, r.Offset)
			require.LessOrEqual(t, int64(len(r.Text)), limit)
			require.True(t, utf8.ValidString(r.Text))
			require.Equal(t, text[r.Offset:r.Next], r.Text)
			got.WriteString(r.Text)
			if r.Next == int64(len(text)) {
				break
			}
			require.Greater(t, r.Next, offset, "progress")
			offset = r.Next
		}
		require.Equal(t, text, got.String(), "limit %d", limit)
	}
	// Starts inside a character move to the next; past the end is empty.
	r, err := output.Read(t.Context(), strings.NewReader("a€b"), 2, 10)
	require.NoError(t, err)
	require.Equal(t, "b", r.Text)
	require.Equal(t, int64(4), r.Offset)
	r, err = output.Read(t.Context(), strings.NewReader("abc"), 10, 10)
	require.NoError(t, err)
	require.Empty(t, r.Text)
	require.Equal(t, int64(3), r.Next)
	// The limit is bounded.
	r, err = output.Read(t.Context(), strings.NewReader(strings.Repeat("x", 3<<20)), 0, 1<<30)
	require.NoError(t, err)
	require.Len(t, r.Text, output.MaxLimit)
}

func TestGrep(t *testing.T) {
	t.Parallel()
	text := "alpha\nbeta\ngamma\n\ndelta"
	re, err := output.Compile("a$")
	require.NoError(t, err)
	r, err := output.Grep(t.Context(), strings.NewReader(text), re, 0, 0)
	require.NoError(t, err)
	var got []string
	for _, l := range r.Lines {
		got = append(got, l.Text)
		require.Equal(t, l.Text, text[l.Offset:l.Offset+int64(len(l.Text))])
		require.False(t, l.Cut)
	}
	require.Equal(t, []string{"alpha", "beta", "gamma", "delta"}, got)
	require.Equal(t, []int64{1, 2, 3, 5}, []int64{r.Lines[0].Number, r.Lines[1].Number, r.Lines[2].Number, r.Lines[3].Number})
	require.Equal(t, int64(len(text)), r.Next)

	// From an offset: the lines that start there or later.
	r, err = output.Grep(t.Context(), strings.NewReader(text), re, 7, 0)
	require.NoError(t, err)
	require.Len(t, r.Lines, 2)
	require.Equal(t, "gamma", r.Lines[0].Text)
	require.Equal(t, int64(11), r.Offset)

	// Empty lines match ^$ and cost their overhead: the limit pages them.
	empty := strings.Repeat("\n", 1000)
	re, err = output.Compile("^$")
	require.NoError(t, err)
	r, err = output.Grep(t.Context(), strings.NewReader(empty), re, 0, 160)
	require.NoError(t, err)
	require.Len(t, r.Lines, 10)
	require.Equal(t, int64(10), r.Next)
}

// A line longer than MaxLimit is matched in pieces; a first match longer
// than the limit is cut to it, at a character.
func TestGrepLongLines(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", output.MaxLimit) + "needle" // 2 MiB and more on one line
	re, err := output.Compile("needle")
	require.NoError(t, err)
	r, err := output.Grep(t.Context(), strings.NewReader("x\n"+long+"\ny"), re, 0, output.MaxLimit)
	require.NoError(t, err)
	require.Len(t, r.Lines, 1)
	l := r.Lines[0]
	require.Equal(t, int64(2), l.Number)
	require.True(t, l.Cut)
	require.True(t, strings.HasSuffix(l.Text, "needle"))
	require.True(t, utf8.ValidString(l.Text))

	re, err = output.Compile("é")
	require.NoError(t, err)
	r, err = output.Grep(t.Context(), strings.NewReader(strings.Repeat("é", 100)), re, 0, 27)
	require.NoError(t, err)
	require.Len(t, r.Lines, 1)
	require.True(t, r.Lines[0].Cut)
	require.Equal(t, strings.Repeat("é", 5), r.Lines[0].Text, "27 bytes less the line's overhead, on a character")
}

func TestCompileBounds(t *testing.T) {
	t.Parallel()
	for _, p := range []string{
		"(",     // syntax
		`(a)\1`, // no backreferences in RE2
		strings.Repeat("a", output.MaxPatternBytes+1), // too long
		"(a{1,100}){1,100}",                           // too large once compiled
		"((a{1000}){1000}){1000}",                     // refused by the parser
	} {
		_, err := output.Compile(p)
		require.True(t, errors.Is(err, output.ErrPattern), "%.40q: %v", p, err)
	}
	_, err := output.Compile(`(?i)error|panic: .*`)
	require.NoError(t, err)
}

func TestReadsEndWithTheirContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := output.Read(ctx, strings.NewReader(strings.Repeat("x", 1<<20)), 1<<19, 10)
	require.ErrorIs(t, err, context.Canceled)
	re, err := output.Compile("x")
	require.NoError(t, err)
	_, err = output.Grep(ctx, strings.NewReader("x\nx\n"), re, 0, 0)
	require.ErrorIs(t, err, context.Canceled)
}

// 64 MiB of log lines searched for a rare pattern, and read at its end.
func BenchmarkGrepAndRead(b *testing.B) {
	var sb strings.Builder
	for i := 0; sb.Len() < 64<<20; i++ {
		sb.WriteString("2026-01-02T03:04:05Z INFO worker: call finished ok in 12ms\n")
	}
	text := sb.String()
	re, err := output.Compile(`panic: |fatal error`)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("grep", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			if _, err := output.Grep(context.Background(), strings.NewReader(text), re, 0, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read-at-end", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			if _, err := output.Read(context.Background(), strings.NewReader(text), int64(len(text))-output.DefaultLimit, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A text that ends inside a character (never valid UTF-8 there) is still
// read to its end: a reader paging until the end stops.
func TestReadReachesTheEndOfABrokenText(t *testing.T) {
	t.Parallel()
	text := "abc\xe2\x82" // "€" cut short
	r, err := output.Read(t.Context(), strings.NewReader(text), 0, 100)
	require.NoError(t, err)
	require.Equal(t, int64(len(text)), r.Next)
	require.True(t, utf8.ValidString(r.Text))
}
