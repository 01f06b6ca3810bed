// Command dispatcher is toolwire's API server. With no flags it starts an
// embedded NATS server (data under ./data), an in-process worker pool for
// every executor type with the built-in tools, and serves the API on
// 127.0.0.1:8080. With --nats-url it joins an external cluster.
package main

import (
	"os"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/executors/sandbox"
	"github.com/toolwire/toolwire/internal/tools/builtin"
)

func main() {
	if sandbox.IsHelper() {
		sandbox.RunHelper()
	}
	os.Exit(dispatch.Main(os.Args[1:], os.Stderr, builtin.Tools()))
}
