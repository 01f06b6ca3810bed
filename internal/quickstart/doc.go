// Package quickstart holds the test that keeps README.md honest: it runs
// every command of the README's quick start, as written there, against a
// dispatcher started the way `make run` starts it (on a random port and a
// temporary data directory). A command that fails, or whose "# prints: X"
// comment does not match its output, fails the test, so the README and
// the code cannot disagree unnoticed.
//
// The package has no code of its own; its test reads the README, builds
// ./cmd/... into a temporary directory and runs the binaries.
package quickstart
