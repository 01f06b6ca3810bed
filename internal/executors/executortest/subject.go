package executortest

import (
	"github.com/toolwire/toolwire/internal/executors"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Fixture names one behaviour the suite exercises. A Subject maps each
// fixture it supports to the spec of a tool of its executor type that
// behaves as described; a fixture missing from the map is a capability the
// executor does not have, and its checks are reported as not applicable.
type Fixture string

// The fixtures. Arguments are JSON objects as described.
const (
	// Echo takes {"text": string} and returns exactly one text block whose
	// text is the argument, byte for byte (unicode, newlines, quotes, and
	// shell metacharacters included).
	Echo Fixture = "echo"
	// Structured takes {"text": string} and returns structured output that
	// is a JSON object {"text": <the argument>} (other content allowed).
	Structured Fixture = "structured"
	// Image takes {} and returns one image block with Subject.Image bytes
	// and MIME type "image/png".
	Image Fixture = "image"
	// Audio takes {} and returns one audio block with Subject.Audio bytes
	// and MIME type "audio/wav".
	Audio Fixture = "audio"
	// ResourceLink takes {} and returns one resource link block with URI
	// "file:///toolwire/link.txt", name "link.txt", MIME type "text/plain".
	ResourceLink Fixture = "resource_link"
	// Resource takes {} and returns one embedded resource block with URI
	// "file:///toolwire/embedded.txt", MIME type "text/plain" and text
	// "embedded".
	Resource Fixture = "resource"
	// Block takes {} and runs until its context ends. While it runs,
	// Subject.Running reports true; once the work has really stopped
	// (process gone, handler returned), false.
	Block Fixture = "block"
	// Progress takes {} and reports progress at least twice (through
	// tool.Progress or the executor's native mechanism, which the executor
	// forwards to the context's tool.Reporter), then returns a text block.
	Progress Fixture = "progress"
	// Panic takes {} and crashes the way tools of its kind crash (a Go
	// panic, a process killed by a signal, a dropped connection). The
	// error type expected is Expect[Panic] (default INTERNAL).
	Panic Fixture = "panic"
	// Big takes {"bytes": n} and produces n bytes of output ('x' repeated)
	// as one text block. The executor either returns all of it or caps it
	// with a visible truncation marker containing "truncated".
	Big Fixture = "big"
	// Intents takes {} and returns, through the executor's intent
	// mechanism, two intents in order: type "toolwire.test.first" with
	// payload {"n":1}, then "toolwire.test.second" with payload {"n":2}.
	Intents Fixture = "intents"
	// Fail takes {"type": NAME} for each NAME in Subject.Fail and fails the
	// way its kind fails (an HTTP status, an exit code, an MCP error); the
	// executor must map it to Subject.Fail[NAME].
	Fail Fixture = "fail"
)

// Subject is an executor under test with its fixture tools.
type Subject struct {
	// Executor under test.
	Executor executors.Executor
	// Tools by fixture; each spec is handed to Execute as the call's spec.
	Tools map[Fixture]*toolwirev1.ToolSpec
	// Running reports whether the work of the current Block call is still
	// running. Required when Tools has Block.
	Running func() bool
	// Image and Audio are the bytes the Image and Audio fixtures return.
	Image, Audio []byte
	// Fail maps each NAME the Fail fixture accepts to the error type the
	// executor must answer.
	Fail map[string]toolwirev1.ErrorType
	// BadArgs are arguments for the Echo tool that the executor itself
	// must refuse (not just the dispatcher's schema check), with
	// Expect[BadArgs] (default VALIDATION). Nil skips the check.
	BadArgs []byte
	// Expect overrides the error type expected for Panic and BadArgs.
	Expect map[Fixture]toolwirev1.ErrorType
	// BigBytes is the output size the Big check asks for. Default 4 MiB.
	BigBytes int
}

// BadArgs is the key of Subject.Expect for the bad-arguments check.
const BadArgs Fixture = "bad_args"
