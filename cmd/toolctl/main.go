// Command toolctl calls, watches and cancels tools and inspects the tool
// registry of a toolwire dispatcher, and lists and retries dead letters.
// See internal/toolctl for the commands and exit statuses.
package main

import (
	"os"

	"github.com/toolwire/toolwire/internal/toolctl"
)

func main() {
	os.Exit(toolctl.Main(os.Args[1:], os.Stdout, os.Stderr))
}
