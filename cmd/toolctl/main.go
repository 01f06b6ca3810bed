// Command toolctl calls tools and inspects the tool registry of a toolwire
// dispatcher. See internal/toolctl for the commands and exit statuses.
package main

import (
	"os"

	"github.com/toolwire/toolwire/internal/toolctl"
)

func main() {
	os.Exit(toolctl.Main(os.Args[1:], os.Stdout, os.Stderr))
}
