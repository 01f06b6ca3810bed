package main

import (
	"os"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatchd"
	"github.com/toolwire/toolwire/internal/executors/sandbox"
)

func main() {
	if sandbox.IsHelper() {
		sandbox.RunHelper()
	}
	os.Exit(dispatchd.Main(os.Args[1:], os.Stderr, builtin.Tools()))
}
