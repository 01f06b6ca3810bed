// Command toolctl calls, watches and cancels tools, reads their whole
// output and inspects the tool registry of a toolwire dispatcher, lists and retries dead letters, and
// audits and replays recorded calls. See internal/toolctl for the commands
// and exit statuses.
package main
