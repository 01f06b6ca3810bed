// Package jsonvalue is the one reader of a call's arguments: one parser,
// with one set of rules, producing one parsed value (*Doc) from which every
// user derives the form it needs, when it first needs it, once.
//
// Admission reads a call's arguments for the JSON Schema check
// (internal/registry), for the policy's argument globs and CEL conditions,
// and for the SHA-256 of their canonical form that approval bindings, the
// loop guard and input requests compare (internal/policy). The two used to
// parse the same bytes with two hand-written parsers whose rules differed
// (invalid strings, number range, depth, errors); with a policy in force a
// call's arguments were parsed by both, and the policy's side up to four
// times. Now both read a Doc.
//
// The package is pure: no I/O, no goroutines.
//
// # Rules
//
// Parse accepts exactly one JSON text (RFC 8259) and refuses, with the
// first thing it finds:
//
//   - What is not JSON (ErrSyntax, an *Error with the byte offset, in
//     encoding/json's words: "invalid character 'x' after object key
//     (offset 5)", "unexpected end of JSON input (offset 6)"): white space
//     other than space, tab, LF and CR (so no byte order mark); a trailing
//     comma; an unquoted key; a control character in a string; an escape
//     other than \" \\ \/ \b \f \n \r \t and \u with four hex digits; a
//     number outside -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?; a
//     literal other than true, false and null; anything but white space
//     after the value. Empty text is not JSON.
//   - An object that names a member twice, after unescaping ("k" and
//     "\u006b" are one key), at any depth (*DuplicateKeyError, which is
//     ErrDuplicateKey, with the JSON Pointer of the repeated member:
//     "/a/0/path"). encoding/json keeps the last, other decoders the first:
//     a validator and a tool could see different arguments.
//   - A string with invalid UTF-8, or with a \u escape of a UTF-16
//     surrogate that is not a high surrogate followed at once by a low one
//     (ErrInvalidString). encoding/json reads both as U+FFFD, which makes
//     different texts one value: "\ud800" and "\udbff" would share a hash.
//   - A number whose exponent has more than nine digits after its leading
//     zeros, beyond ±999999999 (ErrNumberRange), so that no form of a number
//     grows without bound. Numbers are otherwise kept exactly: no form but
//     the native one rounds them.
//   - Arrays and objects nested deeper than MaxDepth, 512 (ErrTooDeep);
//     the outermost is at depth 1. The dispatcher's limit (32 unless a
//     tool's spec raises it) is checked on the text before it is parsed
//     (registry.CheckArgs).
//
// Where the two parsers differed, the stricter rule was kept:
//
//	                           registry (schema)  policy (canonical)   now
//	invalid UTF-8 in a string  U+FFFD per byte    refused              refused
//	unpaired surrogate escape  U+FFFD             refused              refused
//	exponent beyond 9 digits   accepted           refused              refused
//	nesting deeper than        10,000             512                  512
//	a duplicate key is named   by JSON Pointer    by offset            by JSON Pointer
//	errors say                 encoding/json's    "policy: invalid     encoding/json's words and
//	                           words, the offset  JSON at offset N"    the offset; kinds by errors.Is
//
// So arguments that only a policy in force refused before are refused
// without one too, as VALIDATION, at admission and at the worker's
// re-check (registry.CheckArgs), and wherever registry.ValidateArgs reads
// JSON (MCP tools' arguments, intent payloads). Two rules stay where they
// were, since they are about arguments rather than JSON: policy.ParseArgs
// reads empty text (or only white space) as {}, and refuses a value other
// than an object (policy.ErrNotObject); Parse accepts any value.
//
// # Forms
//
// A Doc is immutable and safe for concurrent use; no form it returns may be
// modified. Each form is built at most once, by whichever caller asks
// first (sync.Once):
//
//   - Schema: objects map[string]any, arrays []any, numbers json.Number
//     (their text as written), strings, bools and nil — the value
//     jsonschema.UnmarshalJSON returns for the same text (encoding/json
//     with UseNumber). Parse builds it: every call's arguments are
//     validated. FuzzParse holds it equal to the library's for every text
//     Parse accepts, and holds that Parse refuses every text the library
//     refuses and refuses as not JSON only what the library refuses.
//   - Native (policy.Args.Value): the schema form with every number an
//     int64 when it is whole and fits (2.0 and 1e2 are int64), else a
//     float64 (±Inf beyond its range). Arrays and objects that hold no
//     number anywhere are the schema form's own, not copies.
//   - Canonical and SHA256 (policy.Args.Canonical, Hash; approval
//     bindings, the loop guard, input requests): the canonical text and its
//     SHA-256.
//
// # The canonical form
//
// No white space; object members sorted by the UTF-8 bytes of their keys
// (that is, by code point); strings with only ", \ and control characters
// escaped (as \b \f \n \r \t or \u00xx), everything else as UTF-8; numbers
// as the decimal they denote, so 1, 1.0, 1e0 and 10E-1 are all 1 and -0 is
// 0, never rounded through a float64 (9007199254740993 and
// 9007199254740992 differ, so an approval for one does not cover the
// other). A number is written as its digits while the decimal point falls
// within 21 places of them (1.5, 0.0001, 1e20 → 100000000000000000000),
// else in exponent form (1e+21, 1.5e-7), which agrees with JavaScript's and
// RFC 8785's form wherever a float64 holds the number exactly. Two texts
// have one canonical form exactly when they denote the same JSON value.
// CanonicalNumber and AppendCanonicalString write numbers and strings in
// this form for texts built elsewhere (the tests of policy documents,
// written in YAML).
//
// # Entry points
//
//   - Parse(raw) (*Doc, error): the one parser. The Doc keeps raw (Raw):
//     the caller must not modify it afterwards.
//   - registry.CheckArgs(ent, raw, limits): the size, depth and count
//     limits on the text, then Parse, then the tool's input schema; the
//     VALIDATION refusal or nil. registry.CheckedArgs is the same and
//     returns the Doc of arguments that pass; registry.CheckArgsParsed
//     checks a Doc parsed elsewhere (its limits on Doc.Raw); its answer is
//     CheckArgs' of the same text. registry.ValidateArgs(schema, raw) is
//     Parse and a schema alone (an MCP server's own input schema, intent
//     payloads); registry.ParseViolation turns a refusal of Parse into the
//     violation those answer.
//   - policy.ParseArgs(raw) (*policy.Args, error): Parse (empty text as
//     {}), and an object. policy.ArgsFrom(doc) gives the Args of a Doc
//     parsed already; Args.Doc returns it. policy.ArgsDigest (ParseArgs)
//     and policy.Canonicalize (Parse, any value) give the canonical form's
//     SHA-256 and text. A nil *policy.Args is {}.
//
// To read a call's arguments once, a caller checks them with CheckedArgs
// and hands the Doc on, so that the policy decision, hooks, the loop guard
// and limits share one *policy.Args:
//
//	doc, te := registry.CheckedArgs(ent, call.Arguments, limits)
//	if te != nil {
//		return te // VALIDATION
//	}
//	args, err := policy.ArgsFrom(doc) // policy.ErrNotObject for a non-object
//	…
//	dec := p.Decide(policy.Input{Tool: spec, Args: args, Caller: call.Caller})
//
// A before-hook that rewrites the arguments makes a new text, so a new
// Doc: check it again (CheckedArgs) and take its Args.
//
// # Cost
//
// BenchmarkParse (a loaded 2-core Xeon): Parse takes a quarter of the time
// jsonschema.UnmarshalJSON takes on a 15-byte object (0.5 against 1.9 µs,
// 4 against 11 allocations) and half on a 449-byte one (6.9 against 13.8
// µs, 44 against 105 allocations): strings without escapes and numbers are
// pieces of one copy of the text, the integers 0 to 999 are boxed once, and
// a caller that keeps no pointer to the Doc (registry.ValidateArgs) has it
// on its stack. The native and canonical forms cost nothing until they are
// asked for (BenchmarkForms): policy.ParseArgs is the parse alone, less
// than half of what the policy's own parser took, and the parse with all
// three forms takes about what that parser took for them in one pass
// (BenchmarkArgs in internal/policy).
package jsonvalue
