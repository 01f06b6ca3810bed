// Package configvalue holds the value types of configuration files shared by
// the worker's sections (sandbox, http, mcp, pools): durations written as
// strings, and references to secrets that live in the worker's
// environment or in files, never in the file itself.
package configvalue
