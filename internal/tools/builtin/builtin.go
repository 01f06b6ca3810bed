package builtin

import "github.com/toolwire/toolwire/pkg/tool"

// Tools returns the built-in tools, for a native executor to serve and the
// registry to publish.
func Tools() []*tool.Tool {
	return []*tool.Tool{echoTool, sleepTool, failTool, rememberTool}
}
