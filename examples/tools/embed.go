package tools

import "embed"

// FS holds the *.yaml spec files of this directory.
//
//go:embed *.yaml
var FS embed.FS
