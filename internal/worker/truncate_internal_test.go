package worker

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/output"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// inlineParts splits the output text of a cut response into the kept
// text and the marker.
func inlineParts(t *testing.T, short *toolwirev1.ToolResponse, tail bool) (kept, marker string) {
	t.Helper()
	text := output.Text(short)
	if tail {
		marker, kept, _ = strings.Cut(text, "\n")
	} else {
		i := strings.LastIndexByte(text, '\n')
		kept, marker = text[:max(i, 0)], text[i+1:]
	}
	require.True(t, strings.HasPrefix(marker, "[output truncated"), "marker %q", marker)
	return kept, marker
}

// Whatever the blocks and limits, the cut output is within the limits
// (bytes and lines, the marker included), valid UTF-8, a head or a tail
// of the whole text, and uses its room.
func TestCutStaysWithinTheLimits(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"a", "é", "€", "😀", "\n", "\n\n", "word ", "ligne"}
	for i := range 3000 {
		var content []*toolwirev1.Content
		for range rng.IntN(5) + 1 {
			if rng.IntN(5) == 0 {
				content = append(content, tool.Image([]byte{1, 2}, "image/png"))
				continue
			}
			var b strings.Builder
			for range rng.IntN(400) {
				b.WriteString(words[rng.IntN(len(words))])
			}
			content = append(content, tool.Text(b.String()))
		}
		resp := &toolwirev1.ToolResponse{Content: content, Meta: &toolwirev1.ResponseMeta{}}
		text := output.Text(resp)
		lim := outputLimits{bytes: int64(rng.IntN(1500)), lines: int64(rng.IntN(60)), tail: rng.IntN(2) == 0}
		name := fmt.Sprintf("case %d: %+v", i, lim)
		short := cut(resp, text, lim, cutOptions{callID: "01CALL"})
		inline := output.Text(short)
		require.True(t, utf8.ValidString(inline), name)
		if lim.bytes > 0 {
			require.LessOrEqual(t, int64(len(inline)), lim.bytes, name)
		}
		if lim.lines > 0 {
			require.LessOrEqual(t, output.Lines(inline), lim.lines, name)
		}
		if lim.bytes > 0 && lim.bytes < 200 {
			continue // the marker alone may fill it
		}
		kept, _ := inlineParts(t, short, lim.tail)
		if lim.tail {
			require.True(t, strings.HasSuffix(text, kept), "%s: a tail", name)
		} else {
			require.True(t, strings.HasPrefix(text, kept), "%s: a head", name)
		}
		if lim.lines == 0 || lim.lines > 2 {
			// At least one more character or line would not have fitted.
			// (The marker's room is reserved for its longest numbers.)
			slack := int64(4 + 3*len(strconv.Itoa(len(text))))
			room := lim.bytes == 0 || int64(len(inline)) > lim.bytes-slack
			roomLines := lim.lines == 0 || output.Lines(inline) >= lim.lines-1
			require.True(t, room || roomLines || len(strings.TrimLeft(kept, "\n")) >= len(strings.Trim(text, "\n"))-1,
				"%s: room left unused: %d bytes, %d lines inline", name, len(inline), output.Lines(inline))
		}
	}
}

// The ISSUE's case: 393 KB, 67,387 lines, limits 4 KB and 100 lines.
func TestCutKeepsTheHeadOrTheTail(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := 1; i <= 67387; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	text := b.String()
	resp := &toolwirev1.ToolResponse{Content: []*toolwirev1.Content{tool.Text(text), tool.Image([]byte{1}, "image/png")},
		StructuredJson: `{"big":"` + strings.Repeat("x", 5000) + `"}`, Meta: &toolwirev1.ResponseMeta{}}

	head := cut(resp, text, outputLimits{bytes: 4096, lines: 100}, cutOptions{callID: "01CALL"})
	kept, marker := inlineParts(t, head, false)
	require.Equal(t, strings.Join(strings.Fields(text)[:99], "\n"), kept, "the first 99 lines")
	require.Equal(t, "[output truncated: showing the first 99 of 67387 lines (287 of 393216 bytes); read on with: toolctl output 01CALL --offset 287]", marker)
	require.Empty(t, head.StructuredJson, "structured output over the byte limit is left out")
	require.Len(t, head.Content, 2, "the image was after the cut: left out")

	tail := cut(resp, text, outputLimits{bytes: 4096, lines: 100, tail: true}, cutOptions{callID: "01CALL"})
	kept, marker = inlineParts(t, tail, true)
	require.Equal(t, strings.Join(strings.Fields(text)[67387-99:], "\n")+"\n", kept, "the last 99 lines")
	require.Contains(t, marker, "showing the last 99 of 67387 lines")
	require.Len(t, tail.Content, 3, "the marker, the text, the image after it")
	require.NotNil(t, tail.Content[2].GetImage())

	// Bytes bind: one long line.
	long := strings.Repeat("0123456789", 40000)
	one := &toolwirev1.ToolResponse{Content: []*toolwirev1.Content{tool.Text(long)}, Meta: &toolwirev1.ResponseMeta{}}
	short := cut(one, long, outputLimits{bytes: 4096, lines: 100, tail: true}, cutOptions{callID: "01CALL"})
	inline := output.Text(short)
	require.LessOrEqual(t, len(inline), 4096)
	require.Greater(t, len(inline), 3900)
	kept, _ = inlineParts(t, short, true)
	require.True(t, strings.HasSuffix(long, kept))

	// No text block: the structured JSON is the text.
	js := &toolwirev1.ToolResponse{StructuredJson: `{"k":"` + strings.Repeat("v", 10000) + `"}`, Meta: &toolwirev1.ResponseMeta{}}
	short = cut(js, output.Text(js), outputLimits{bytes: 1000}, cutOptions{callID: "01CALL"})
	require.Empty(t, short.StructuredJson)
	kept, _ = inlineParts(t, short, false)
	require.True(t, strings.HasPrefix(js.StructuredJson, kept))
	require.NotEmpty(t, kept)
}

// A tool's limits make a response over them cut although it is far below
// the inline limit; one within them is published as it is.
func TestLimitsOfTheSpecDecide(t *testing.T) {
	t.Parallel()
	small := &toolwirev1.ToolResponse{Content: []*toolwirev1.Content{tool.Text("one\ntwo")}}
	require.False(t, outputLimits{}.over(small))
	require.False(t, outputLimits{bytes: 7, lines: 2}.over(small))
	require.True(t, outputLimits{bytes: 6}.over(small))
	require.True(t, outputLimits{lines: 1}.over(small))
	require.True(t, outputLimits{bytes: 10}.over(&toolwirev1.ToolResponse{Content: small.Content, StructuredJson: `{"a":"0123456789"}`}))
}
