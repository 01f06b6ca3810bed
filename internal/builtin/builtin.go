package builtin

import (
	"slices"
	"sync"

	"github.com/toolwire/toolwire/pkg/tool"
)

// Tools returns the built-in tools, for a native executor to serve and the
// registry to publish.
func Tools() []*tool.Tool { return slices.Clone(tools()) }

// tools are built on first use, not at package init: every process start
// of a worker binary pays for package inits, and sandbox helpers are such
// starts.
var tools = sync.OnceValue(func() []*tool.Tool {
	return []*tool.Tool{newEchoTool(), newSleepTool(), newFailTool(), newRememberTool()}
})
