// Package toolctl is the toolwire command-line tool for operators and tool
// developers: call tools, submit calls and fetch their results, and
// inspect the tool registry, through a dispatcher's API with pkg/client.
//
//	toolctl call echo '{"text":"hi"}'
//	toolctl submit sleep '{"duration":"10s"}'
//	toolctl get 01J... --wait 1m
//	toolctl tools list --format openai
//	toolctl tools show echo -o json
//
// # Connection
//
// --server (env TOOLWIRE_SERVER, default http://127.0.0.1:8080, where a
// dispatcher with no configuration serves) is the dispatcher's API;
// --api-key (env TOOLWIRE_API_KEY) is sent as a bearer token. Flags win
// over the environment. --timeout bounds the whole command; a call's wait
// ends shortly before it, so a slow call still reports its id.
//
// # Output
//
// Results go to stdout, everything else to stderr. With -o text (the
// default) a successful call prints its content blocks (text as is, other
// kinds described in brackets; the structured output when there are no
// blocks), and its intents on stderr; a failed call prints
// "error: TYPE: message", one "  FIELD: message" line per offending
// field, and the suggestion and retry advice, on stderr. submit prints the
// call id. With -o json, call and get print the whole answer (call id,
// state and response envelope) as protobuf JSON, submit the SubmitResponse,
// and tools the specs; the exit status still tells the outcome.
//
// # Exit status
//
//   - 0 (ExitOK): the call succeeded, or the command did what it was asked.
//   - 1 (ExitToolError): the fabric answered with an error — the tool
//     failed, the call was refused at admission (VALIDATION, NOT_FOUND,
//     PERMISSION_DENIED, ...), or the tool or call id named is unknown.
//   - 2 (ExitUsage): bad flags or arguments, including call arguments
//     that are not JSON (refused before anything is sent), or a request
//     that got no answer: the dispatcher is unreachable, refused the
//     credentials, or --timeout passed.
//   - 3 (ExitPending): the call was accepted but has no result yet (the
//     wait of call or get ended first). It keeps running; its id is
//     printed on stdout, for `toolctl get ID --wait D`. A separate status,
//     so scripts can poll without parsing output.
package toolctl
