package main

import (
	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/executors/sandbox"
	"github.com/toolwire/toolwire/pkg/toolworker"
)

func main() {
	if sandbox.IsHelper() {
		sandbox.RunHelper()
	}
	toolworker.Main(builtin.Tools()...)
}
