// Package redact keeps the values of secret arguments out of everything a
// call produces. A tool's input schema marks a property secret with
// "x-toolwire-secret": true (Keyword; native tools set it with the struct
// tag `toolwire:"secret"`). This package is the one redaction step of the
// fabric: the dispatcher, the worker, the http executor, audits and the
// dead-letter tools all use it.
//
//	plan := redact.ForSpec(spec)            // nil when nothing is secret
//	sec := plan.Secrets(call.Arguments)     // this call's secret values
//	sec.Response(resp)                      // before the response is stored
//	shown := plan.Arguments(call.Arguments) // {"password":"[REDACTED]"}
//
// # Two ways of redacting
//
// Structure: Plan.Arguments replaces each secret argument field by
// "[REDACTED]", whatever its value, and keeps every other value byte for
// byte; audit records and `toolctl dlq` show arguments this way.
//
// Values: Plan.Secrets extracts the secret values of one call, and
// Secrets replaces each occurrence of them, as a substring, in any text:
// error messages answered to callers and stored, event messages, log
// lines, dead-letter reasons, a response's content text, structured JSON
// (which stays valid JSON) and resource fields. Each value is looked for
// in the forms messages carry it in: as is, JSON-escaped (also twice),
// Go-quoted (net/http quotes URLs in its errors), and percent-encoded as a
// query value, a path segment and by the http executor's strict rule. So
// a JSON Schema `pattern` error that quotes the value, a sandbox argument
// refused for starting with "-", or `Get "https://host/?token=…": dial tcp
// …` from net/http all reach the caller with "[REDACTED]" in its place.
//
// # Short values
//
// A value shorter than MinLen (4 bytes) is not replaced inside texts: it
// cannot be told apart from ordinary text, and replacing "7" everywhere
// would garble every message and still show where it was. It is replaced
// only where it stands quoted ('v', "v", \"v\"), which is how error
// messages quote values, and as a whole JSON string in structured output;
// the argument field itself is always redacted in structured views
// (Plan.Arguments). Booleans and null are never treated as secret values.
//
// # Failing closed
//
// A schema that marks a property where the plan cannot follow it (the
// plan follows properties, items and additionalProperties; not $ref,
// allOf, anyOf, patternProperties, ...) or that is not JSON gives an
// incomplete plan: Arguments then replaces the arguments whole, and
// Secrets treats every string and number of the arguments as secret.
// Arguments that are not JSON are redacted whole, and their whole text is
// the one secret value. AllOf does the same for arguments whose schema is
// unknown (a spec version no longer in the registry).
//
// # Cost
//
// Compile (and ForSpec) return nil for a schema that does not contain
// Keyword after one substring search of its text: no parse, no lock, no
// allocation, so tools without secret fields pay next to nothing (see
// BenchmarkNoSecrets). Plans of schemas with secrets are compiled once per
// schema text and cached (up to 1024, then the cache starts over). For
// those tools Secrets parses the arguments once per use; Secrets.String
// returns its input without allocating when no secret form occurs in it.
//
// # Not redacted
//
// A call's own arguments where they are needed to run it: the calls
// stream, the retries stream, dead letters' calls (a retry runs them),
// calls parked for an approver (the approvals bucket), Record.Call of
// audits. These stores therefore hold secret arguments in clear (the list
// in docs/reliability.md, Security, which a test in internal/mcpserver
// keeps true); encrypt JetStream at rest. The MCP tasks bucket is not one
// of them: it keeps a task's arguments redacted (Plan.Arguments) and reads
// them back from the stored call when the task goes on. Also not
// redacted: intents (structured data for an orchestrator, validated
// against their declared schemas), binary content (images, audio,
// blobs), identifiers, and what an MCP server writes to its stderr.
package redact
