// Package specfile loads tool specs declared in files: the way sandbox and
// HTTP tools (and any tool whose behaviour is configuration, not code)
// enter the registry.
//
// # Format
//
// A spec file is YAML 1.2 (or JSON), one tool per file, named NAME.yaml,
// read with go.yaml.in/yaml/v3. Only the core schema's true and false
// (also True, TRUE, False, FALSE) are booleans: y, yes, on, off, n, no and
// the other YAML 1.1 words are strings, as values and as keys, so a
// schema property named n or on keeps its name (YAML 1.1 readers turn it
// into "false" or "true", and its constraints then guard nothing). A
// mapping key is always its text (key 2 is "2"), a key repeated in one
// mapping is an error, and anchors, aliases and merge keys (<<) work. Its
// fields are the ToolSpec's (proto field names, snake_case), with three
// conveniences:
//
//   - input_schema and output_schema (and a definition's input_schema)
//     are written as YAML objects, not as JSON strings
//     (input_schema_json / output_schema_json also work);
//   - executor, category and limits.truncate take short names: executor:
//     sandbox, category: retrieval, truncate: tail;
//   - durations are strings such as "10s" or "1m30s".
//
// Every file must say what the tool is for twice: summary, 2 to 4 lines
// that an agent reads to pick a tool, and doc, the full documentation
// (usage, arguments, failure modes). provider defaults to "local".
//
//	name: sha256
//	title: SHA-256 of a text
//	summary: |
//	  Computes the SHA-256 digest of a text.
//	  Use it to compare or fingerprint content.
//	doc: |
//	  ...
//	executor: sandbox
//	input_schema:
//	  type: object
//	  properties: {text: {type: string}}
//	  required: [text]
//	sandbox:
//	  argv: [sha256sum]
//	  stdin_arg: text
//
// # Checks
//
// Load refuses, naming the file and field, a spec that does not decode,
// has unknown fields, lacks a summary (or has more than 4 lines of one) or
// a doc, fails registry.Check (name, executor config, schemas that
// compile), or fails the check its executor type registers with
// RegisterCheck (the sandbox and HTTP executors check that their template
// variables are properties of the input schema). A worker loads its spec
// files at start-up and refuses to start on any error: a typo never
// reaches the registry.
//
// # Variables
//
// ${NAME} in a string value is replaced by Options.Vars[NAME] (an unknown
// name is an error): the built-in examples use ${TOOLWIRE_HTTP} for the
// dispatcher's own address. Values come from the operator's
// configuration, never from call arguments.
package specfile
