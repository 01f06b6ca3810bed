// Command worker serves toolwire worker pools with the built-in tools:
//
//	worker --nats-url nats://127.0.0.1:4222 --pools native --concurrency 64
package main

import (
	"github.com/toolwire/toolwire/internal/executors/sandbox"
	"github.com/toolwire/toolwire/internal/tools/builtin"
	"github.com/toolwire/toolwire/pkg/toolworker"
)

func main() {
	if sandbox.IsHelper() {
		sandbox.RunHelper()
	}
	toolworker.Main(builtin.Tools()...)
}
