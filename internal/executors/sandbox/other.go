//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"os"
	"slices"

	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// errUnsupported is returned by New off Linux: every mechanism the
// sandbox relies on (namespaces, Landlock, seccomp) is Linux's.
var errUnsupported = errors.New("sandbox: only supported on Linux")

// The worker's owner closes an Executor through executors.Closer.
var _ executors.Closer = (*Executor)(nil)

// Executor runs sandbox tools; off Linux it cannot be created.
type Executor struct{}

// New returns an error: the sandbox needs Linux.
func New(Config) (*Executor, error) { return nil, errUnsupported }

// Execute returns an error: the sandbox needs Linux.
func (*Executor) Execute(context.Context, *executors.Request) (*tool.Result, error) {
	return nil, errUnsupported
}

// IsolationGaps names every mechanism: none exists off Linux.
func (*Executor) IsolationGaps() []string { return slices.Clone(Mechanisms) }

// SpecIsolationGaps names nothing more: every mechanism is missing already.
func (*Executor) SpecIsolationGaps(*toolwirev1.ToolSpec) []string { return nil }

// CheckSpec validates spec as the package's CheckSpec does.
func (*Executor) CheckSpec(spec *toolwirev1.ToolSpec) error { return CheckSpec(spec) }

// Close does nothing.
func (*Executor) Close(context.Context) error { return nil }

// IsHelper reports false: there is no helper off Linux.
func IsHelper() bool { return false }

// RunHelper exits: there is no helper off Linux.
func RunHelper() { os.Exit(126) }
