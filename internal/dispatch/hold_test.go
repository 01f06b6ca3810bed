package dispatch_test

import (
	"context"

	"github.com/toolwire/toolwire/pkg/tool"
)

// releasedHold is the native tool "hold" of the dispatch tests: each call
// sends on started (buffered for n calls) once it runs, then answers
// "held" when release is closed or its context ends.
func releasedHold(n int) (hold *tool.Tool, started chan struct{}, release chan struct{}) {
	started = make(chan struct{}, n)
	release = make(chan struct{})
	hold = tool.Must(tool.New("hold", func(ctx context.Context, _ struct{}) (string, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "held", nil
	}))
	return hold, started, release
}
