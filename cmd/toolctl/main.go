package main

import (
	"os"

	"github.com/toolwire/toolwire/internal/toolctl"
)

func main() {
	os.Exit(toolctl.Main(os.Args[1:], os.Stdout, os.Stderr))
}
