package executors

import (
	"context"

	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Request is one attempt of one call, handed to an executor.
type Request struct {
	// Call is the decoded call; Call.Arguments holds the exact JSON bytes.
	Call *toolwirev1.ToolCall
	// Spec is the tool's spec at the version the call pinned.
	Spec *toolwirev1.ToolSpec
}

// Executor runs one attempt of a call under ctx. It returns the tool's
// output, or an error: a *tool.Error (see tool.AsError) whose type decides
// what the worker does next. ctx carries the attempt's deadline and is
// cancelled with a cause (caller cancel, shutdown) that the executor must
// honour by stopping the work.
//
// An executor must be safe for concurrent use. It may panic: the worker
// recovers and answers INTERNAL, but executors should not rely on that.
type Executor interface {
	Execute(ctx context.Context, req *Request) (*tool.Result, error)
}

// Closer is implemented by executors that hold resources beyond a call:
// MCP sessions and server processes, sandboxes, HTTP connections. Whoever
// owns an executor closes it through Close once the worker serving it has
// stopped; ctx bounds the wait, and Close returns ctx's error if it gave
// up. Close is idempotent. An executor without resources does not
// implement it.
type Closer interface {
	Close(ctx context.Context) error
}

// Close closes e if it is a Closer, and does nothing (nil) otherwise.
func Close(ctx context.Context, e Executor) error {
	if c, ok := e.(Closer); ok {
		return c.Close(ctx)
	}
	return nil
}

// Func adapts a function to Executor.
type Func func(ctx context.Context, req *Request) (*tool.Result, error)

// Execute calls f.
func (f Func) Execute(ctx context.Context, req *Request) (*tool.Result, error) { return f(ctx, req) }

// Isolated is implemented by executors whose isolation depends on the host
// (the sandbox). IsolationGaps names each mechanism the host lacks, such as
// "landlock" or "seccomp"; the worker logs them at start-up and copies them
// into the meta of every response of that executor type, so weaker
// isolation is never silent.
type Isolated interface {
	IsolationGaps() []string
}

// SpecIsolated is implemented by executors whose isolation also differs by
// tool: SpecIsolationGaps names the gaps of one tool on top of the host's
// (the sandbox's "host-network" for a tool with network access). The
// worker adds them to the meta of that tool's responses.
type SpecIsolated interface {
	SpecIsolationGaps(*toolwirev1.ToolSpec) []string
}
