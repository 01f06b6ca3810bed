// Command worker serves toolwire worker pools with the built-in tools, and
// the spec-file and MCP tools its --config file names (see
// internal/workerconfig):
//
//	worker --nats-url nats://127.0.0.1:4222 --pools native --concurrency 64
//
// The flags, their TOOLWIRE_* environment equivalents and the exit
// statuses are those of pkg/toolworker's Main.
package main
