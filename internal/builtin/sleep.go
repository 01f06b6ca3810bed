package builtin

import (
	"context"
	"time"

	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// MaxSleep is the longest duration sleep accepts.
const MaxSleep = time.Hour

// SleepInput is the input of sleep.
type SleepInput struct {
	Duration string `json:"duration" jsonschema:"how long to sleep, as a Go duration such as 250ms or 1m30s; at most 1h"`
	Text     string `json:"text,omitempty" jsonschema:"text to return after sleeping"`
}

// SleepOutput is the output of sleep.
type SleepOutput struct {
	// Slept is the duration slept, in Go's notation.
	Slept string `json:"slept"`
	text  string
}

// ToolContent implements tool.ContentProvider: the input's text if it had
// one, else a sentence saying how long the tool slept.
func (o SleepOutput) ToolContent() []*toolwirev1.Content {
	if o.text != "" {
		return []*toolwirev1.Content{tool.Text(o.text)}
	}
	return []*toolwirev1.Content{tool.Text("slept " + o.Slept)}
}

func newSleepTool() *tool.Tool {
	return tool.Must(tool.New("sleep", sleep,
		tool.WithTitle("Sleep"),
		tool.WithSummary("Waits for a duration (at most 1h), then returns.\nStops at once when the call is cancelled."),
		tool.WithDescription("Waits for the given duration, then returns how long it slept and the optional text. "+
			"It stops as soon as the call is cancelled or times out. Useful to test timeouts, cancellation and load."),
		tool.WithCategory(toolwirev1.ToolCategory_TOOL_CATEGORY_UTILITY),
		tool.ReadOnly(), tool.Idempotent(), tool.OpenWorld(false),
	))
}

// sleep waits for the duration or until ctx ends, whichever comes first,
// and returns ctx.Err() in the second case.
func sleep(ctx context.Context, in SleepInput) (SleepOutput, error) {
	d, err := time.ParseDuration(in.Duration)
	switch {
	case err != nil:
		return SleepOutput{}, tool.InvalidArgument("/duration", "not a Go duration such as 250ms or 1m30s")
	case d < 0:
		return SleepOutput{}, tool.InvalidArgument("/duration", "must not be negative")
	case d > MaxSleep:
		return SleepOutput{}, tool.InvalidArgument("/duration", "must be at most "+MaxSleep.String())
	}
	if err := ctx.Err(); err != nil {
		return SleepOutput{}, err
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return SleepOutput{}, ctx.Err()
	case <-timer.C:
		return SleepOutput{Slept: d.String(), text: in.Text}, nil
	}
}
