// Package tools holds the example tool spec files that the dispatcher's
// default configuration serves: the sandbox tools sha256 and grep_lines,
// and toolwire_catalog, an HTTP tool that works offline (see
// internal/specfile for the format). They are embedded so that
// `dispatcher` with no flags serves them from any directory.
package tools
