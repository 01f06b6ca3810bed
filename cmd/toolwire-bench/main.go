package main

import (
	"os"

	"github.com/toolwire/toolwire/internal/bench"
	"github.com/toolwire/toolwire/internal/executors/sandbox"
)

func main() {
	if sandbox.IsHelper() {
		sandbox.RunHelper()
	}
	os.Exit(bench.Main(os.Args[1:], os.Stdout, os.Stderr))
}
