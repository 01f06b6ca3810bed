package main

import (
	"context"
	"strings"

	"github.com/toolwire/toolwire/pkg/tool"
	"github.com/toolwire/toolwire/pkg/toolworker"
)

// WordCountIn is the tool's input; its JSON Schema is derived from it.
type WordCountIn struct {
	Text string `json:"text" jsonschema:"the text to count"`
}

// WordCountOut is the tool's structured output.
type WordCountOut struct {
	Words int `json:"words"`
	Lines int `json:"lines"`
}

var wordCount = tool.Must(tool.New("word_count",
	func(_ context.Context, in WordCountIn) (WordCountOut, error) {
		return WordCountOut{Words: len(strings.Fields(in.Text)), Lines: len(strings.FieldsFunc(in.Text, isNewline))}, nil
	},
	tool.WithSummary("Counts the words and the non-empty lines of a text."),
	tool.ReadOnly(), tool.Idempotent(),
))

func isNewline(r rune) bool { return r == '\n' }

func main() {
	toolworker.Main(wordCount)
}
