// Package mcp is the executor of tools imported from MCP servers, built on
// the official Go SDK (github.com/modelcontextprotocol/go-sdk).
package mcp
