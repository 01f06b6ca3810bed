// Package tools holds the example tool spec files that the dispatcher's
// default configuration serves: a sandbox tool and an HTTP tool that works
// offline (see internal/specfile for the format). They are embedded so
// that `dispatcher` with no flags serves them from any directory.
package tools

import "embed"

// FS holds the *.yaml spec files of this directory.
//
//go:embed *.yaml
var FS embed.FS
