package tool_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// printer is a reporter that prints what a worker would publish.
type printer struct{}

func (printer) Progress(string, float64) {}
func (printer) Heartbeat()               {}
func (printer) Partial(seq uint32, content []*toolwirev1.Content) error {
	fmt.Printf("chunk %d: %q\n", seq, content[0].GetText().GetText())
	return nil
}

// docs:partial-example
type SummariseIn struct {
	Lines []string `json:"lines" jsonschema:"the text to summarise, a line an item"`
}

// summarise streams a line of output per line it reads, then returns
// the whole summary: the result is what it returns, whatever it streamed.
func summarise(ctx context.Context, in SummariseIn) (string, error) {
	var out strings.Builder
	streaming := true
	for _, line := range in.Lines {
		s := strings.ToUpper(line) + "\n"
		out.WriteString(s)
		// Partial output is best effort: once it is refused (past its bound,
		// tool.ErrPartialLimit) the tool stops sending it and goes on, and
		// the result still has everything.
		if streaming && tool.PartialText(ctx, s) != nil {
			streaming = false
		}
	}
	return out.String(), nil
}

// docs:end

// A tool sends partial output during its call with tool.PartialText (or
// tool.Partial, any content blocks); a worker publishes each chunk,
// numbered, as a PROGRESS event before the result. Here a printer
// stands in for the worker's reporter.
func ExamplePartialText() {
	t := tool.Must(tool.New("summarise", summarise, tool.ReadOnly()))
	ctx := tool.WithReporter(context.Background(), printer{})
	res, err := t.Invoke(ctx, []byte(`{"lines":["first","second"]}`))
	if err != nil {
		panic(err)
	}
	fmt.Printf("result: %q\n", res.Content[0].GetText().GetText())
	// Output:
	// chunk 1: "FIRST\n"
	// chunk 2: "SECOND\n"
	// result: "FIRST\nSECOND\n"
}

// The example stops sending once its partial output is refused.
func TestPartialExampleStopsWhenRefused(t *testing.T) {
	t.Parallel()
	rep := &closed{}
	out, err := summarise(tool.WithReporter(t.Context(), rep), SummariseIn{Lines: []string{"a", "b", "c"}})
	require.NoError(t, err)
	require.Equal(t, "A\nB\nC\n", out)
	require.Equal(t, 1, rep.partials, "nothing sent after the refusal")
	require.Zero(t, rep.progress)
}

// docs/tools.md shows the example above verbatim.
func TestDocsShowThePartialExample(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("example_partial_test.go")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(src), "// docs:partial-example\n")
	require.True(t, ok)
	code, _, ok := strings.Cut(rest, "\n// docs:end\n")
	require.True(t, ok)
	docs, err := os.ReadFile("../../docs/tools.md")
	require.NoError(t, err)
	require.Contains(t, string(docs), "```go\n"+code+"```\n", "docs/tools.md shows summarise verbatim")
}
