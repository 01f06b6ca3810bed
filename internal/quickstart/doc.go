// Package quickstart holds the test that keeps README.md honest: it runs
// every command of the README's quick start, as written there, against a
// dispatcher started the way `make run` starts it (on a random port and a
// temporary data directory). A command that fails, or whose "# prints: X"
// comment does not match its output, fails the test, so the README and
// the code cannot disagree unnoticed.
//
// The package has no code of its own; its test reads the README, builds
// ./cmd/... into a temporary directory and runs the binaries.
//
// Its other tests keep README.md and docs/*.md honest without running
// anything: TestDocsCodeReferences checks that every file and function
// they name as `path/file.go:Function` (or `:Type.Method`, relative to the
// repository root) exists — docs/architecture.md tells the life of a call
// as such hops — and TestDocsLinks that every relative link reaches a file
// and every #anchor a heading.
package quickstart
