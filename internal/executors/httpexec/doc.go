// Package httpexec is the executor of http tools (DESIGN §7): a tool is a
// spec's HttpConfig — a method, a URL template, an optional body template,
// headers and secret headers, and the allowlists of the SSRF guard — and a
// call is one HTTP request whose response becomes the result.
//
// # Requests
//
// Method: GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS, written in upper
// case; empty means GET.
//
// url_template is RFC 6570 simple expansion and nothing more: each {name}
// is replaced by the argument name — a string's value, a number's JSON
// text, true or false — with every byte except the unreserved ALPHA,
// DIGIT, "-", ".", "_" and "~" percent-encoded, so a value stays inside
// its segment whatever it holds ("../", "/", "?", "#", unicode). Operators
// ({+x} passes "../" and "/", {#x}, {/x}, {?x}, ...), lists ({a,b}) and
// modifiers ({x:3}, {x*}) are refused, as is anything built with
// url.JoinPath. Expressions may appear only after the host: arguments never
// choose the scheme, host, port or user information. In the path, a
// missing or null argument, "", "." and ".." are VALIDATION errors (they
// would change the path's shape: "/users/{id}" must not become "/users/"
// or the parent directory); in the query they expand to "". Objects and
// arrays are VALIDATION errors. A fragment in the template is refused: it
// is never sent.
//
// query_args names arguments sent as query parameters, appended in the
// listed order after any query of the template: a scalar once, each
// scalar of an array once (name=a&name=b); absent and null arguments are
// left out; objects are VALIDATION errors.
//
// # Bodies
//
// With body_template set, the body is that JSON document with placeholders
// filled:
//
//   - a string that is exactly "{name}" is replaced by the argument's JSON
//     value as sent, of any type (null included); when the argument is
//     absent the member (or array element) is left out, and at the top
//     level that is a VALIDATION error;
//   - inside a longer string, "{name}" is replaced by the argument's text
//     (as in the URL, but JSON-escaped instead of percent-encoded); absent
//     and null arguments give "", objects and arrays are VALIDATION errors;
//   - "{{" is a literal "{", and braces around anything but a name
//     (letters, digits, '_') are literal; object keys are never templated.
//
// For example {"user": "{user}", "note": "by {author}", "tags": ["{tag}"]}
// with {"user": {"id": 7}, "author": "ann"} sends
// {"user":{"id":7},"note":"by ann","tags":[]}.
//
// Without a body template, POST, PUT and PATCH send the arguments that the
// URL and query_args did not use as a JSON object, in their original order
// and bytes (all of them, unchanged, when none were used); other methods
// send no body. Bodies are sent as application/json. GET and HEAD tools
// may not have a body template. Arguments must be a JSON object (empty
// arguments are {}); anything else is VALIDATION.
//
// # Headers and secrets
//
// headers are fixed values. secret_headers map a header to "env:NAME" (the
// worker's environment) or "file:/absolute/path" (trailing line breaks
// removed; at most 64 KiB), read at every call so rotated secrets are
// picked up. A value never comes from arguments, and never appears in
// errors or logs: a secret that does not resolve is INTERNAL naming the
// reference only, logs carry the method, host, status and duration, never
// headers or bodies. Because servers echo headers, secret values of 8
// bytes or more are also replaced by "[REDACTED]" in response bodies,
// error messages and intents (raw and JSON-escaped forms). Secret headers
// are dropped on a redirect to another scheme, host or port, and no
// redirect carries a Referer (net/http would send the redirecting URL,
// query and all, to the next host). Names that the executor or transport
// own (Host, Content-Length, Idempotency-Key, ...) cannot be configured,
// and one name cannot be set twice.
//
// Arguments the input schema marks secret ("x-toolwire-secret": true) are
// redacted like everything a call produces (internal/redact): net/http's
// errors quote the URL, so the error of a failed request and its debug log
// line show "[REDACTED]" for their values, in every encoding the URL
// carries them in. The worker redacts results and errors of every
// executor the same way.
//
// Every request other than GET, HEAD and OPTIONS carries
// "Idempotency-Key: <call id>": the same key on every attempt of a call,
// so a server that honours it applies a retried call once. The header also
// lets net/http replay a request on a keep-alive connection the server
// closed before reading it.
//
// # SSRF guard
//
// Every connection goes through a net.Dialer whose Control function checks
// the address actually dialled, after resolution, with the address guard
// of package egress (the same rule guards the connections of sandbox
// tools with network access), built on code.dny.dev/ssrf: loopback, private, link-local, unique-local, shared, "this network"
// (0.0.0.0/8), documentation, multicast, reserved and transition ranges
// (IPv4-mapped and NAT64 forms included) and ports other than the allowed
// ones are refused, so a name that resolves — or re-resolves, DNS
// rebinding — to such an address is refused too. Proxy is nil: a proxy
// would dial in our place. A tool's allow_networks (and Config
// AllowNetworks) are CIDRs allowed although not public; cloud metadata
// addresses (169.254.169.254, 169.254.170.2, 100.100.100.200,
// fd00:ec2::254) stay refused inside an allowed network unless it is that
// single address (/32, /128). allow_ports (default 80 and 443) plus Config
// AllowPorts are the ports.
//
// Before anything is dialled the URL — the expanded one and every redirect
// target — is checked as well: scheme http or https, no user information
// (http://allowed.example@127.0.0.1/), a host in allow_hosts (exact names
// or "*.domain"; empty means the template's host only), a port in the
// policy, no number-shaped host that is not a canonical address
// (http://2130706433/, http://0177.0.0.1/, http://0x7f.0.0.1/,
// http://127.1/ — resolvers read them as addresses), and IP literals
// through the guard. Redirects are followed up to Config.MaxRedirects
// (default 5). Every refusal is PERMISSION_DENIED with no side effects.
//
// Tools with the same ports and networks share one http.Transport and its
// keep-alive connections; tools with different ones never do, so a
// connection admitted under a wider policy is not reused under a narrower
// one. Close(ctx) (executors.Closer) closes idle connections.
//
// # Responses
//
// A 2xx body is read up to max_response_bytes (default Config
// MaxResponseBytes, 2 MiB), counted after decompression (net/http asks for
// gzip and decompresses, so a small compressed bomb stops at the cap), and
// under the request's deadline (a slow body ends with TIMEOUT). Then:
//
//   - a JSON body (application/json, *+json) that parses becomes one text
//     block holding the JSON; an object is also the structured output;
//   - image/* and audio/* bodies become one image or audio block;
//   - other text, or any valid UTF-8, becomes one text block;
//   - anything else becomes an embedded resource blob with the URL;
//   - an empty body is a text block saying so.
//
// A body over the cap is truncated, not refused, when it is text: the text
// block keeps the first max_response_bytes (cut at a rune boundary) and
// ends with "[truncated: the response exceeded max_response_bytes (N
// bytes)]"; no structured output is given. A truncated image, audio or
// binary body, or a truncated body that should carry intents, is an
// INTERNAL error (side effects as for a sent request).
//
// intents_field names a top-level member of a JSON object body holding
// [{"type": ..., "payload": ...}]; the member is removed from the output.
// intents_header names a response header holding the same array. Intents
// from the field come first, then the header's, with ids "i1", "i2", ...
// Malformed intents are INTERNAL: the server answered, but not as the tool
// promised.
//
// # Configuration and start-up
//
// Config is JSON-tagged for a worker's YAML file; durations are written as
// Go duration strings ("30s", see Duration). CheckSpec validates a spec
// alone; Executor.CheckSpec adds what depends on the Config (the template's
// host and port against the allowlists and the guard) and is what a worker
// should call for each tool at start-up. Execute compiles a spec on every
// call unless the registry set its version (a content hash), in which case
// the compiled form is cached by name and version. Config.Resolver is a
// seam for tests (names resolving to chosen addresses); the guard checks
// whatever it returns.
//
// # Errors
//
// Statuses map as follows; the message quotes the status and up to 512
// bytes of the body, and the body (up to 64 KiB) is the error's content:
//
//	429             RATE_LIMIT, retryable, RetryAfter from Retry-After
//	                (delay-seconds or an HTTP date), side effects none
//	401, 403        AUTH
//	404, 410        NOT_FOUND
//	409             CONFLICT
//	400, 422        VALIDATION: the server refused these arguments; the
//	                model can correct them and call again
//	408             TRANSIENT, retryable
//	other 4xx       PERMANENT
//	501, 505        PERMANENT
//	other 5xx       TRANSIENT, retryable (RetryAfter when given)
//	3xx not followed PERMANENT
//
// 4xx answers report no side effects (the server refused); 5xx and 3xx
// report none for GET, HEAD and OPTIONS and possible ones otherwise.
// Connection failures are TRANSIENT and retryable: with no side effects
// when the connection was never made (refused, unreachable, unresolvable),
// else none for safe methods and possible ones for the others. A failed
// TLS certificate check is PERMANENT. When the context ends, the answer is
// TIMEOUT (the call's deadline or Config.Timeout, default 60 s) or
// CANCELLED (with the cancel's cause), with unknown side effects once the
// request may have reached the server, whatever the method: the server's
// work was interrupted, not refused.
package httpexec
