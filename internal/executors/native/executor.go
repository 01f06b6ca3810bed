package native

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/redact"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Config configures an Executor.
type Config struct {
	// Logger receives the stack of panicking tools, at Error. Default:
	// slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with defaults filled in.
func (c Config) WithDefaults() Config {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Executor runs native tools. It is safe for concurrent use, including
// Add while calls execute.
type Executor struct {
	log *slog.Logger

	mu    sync.RWMutex
	tools map[string]*tool.Tool
}

var _ executors.Executor = (*Executor)(nil)

// New returns an Executor holding tools, logging to slog.Default(). It
// returns an error if two tools share a name or a tool is nil.
func New(tools ...*tool.Tool) (*Executor, error) {
	return NewWithConfig(Config{}, tools...)
}

// NewWithConfig is New with a Config.
func NewWithConfig(cfg Config, tools ...*tool.Tool) (*Executor, error) {
	cfg = cfg.WithDefaults()
	e := &Executor{
		log:   cfg.Logger.With("component", "executor", "executor", "native"),
		tools: make(map[string]*tool.Tool, len(tools)),
	}
	for _, t := range tools {
		if err := e.Add(t); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Add adds t. It returns an error if t is nil or a tool of the same name
// is already held.
func (e *Executor) Add(t *tool.Tool) error {
	if t == nil {
		return fmt.Errorf("native: nil tool")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, dup := e.tools[t.Name()]; dup {
		return fmt.Errorf("native: duplicate tool %q", t.Name())
	}
	e.tools[t.Name()] = t
	return nil
}

// Specs returns the specs of the tools held, sorted by name, for the
// registry to publish.
func (e *Executor) Specs() []*toolwirev1.ToolSpec {
	e.mu.RLock()
	defer e.mu.RUnlock()
	specs := make([]*toolwirev1.ToolSpec, 0, len(e.tools))
	for _, name := range slices.Sorted(maps.Keys(e.tools)) {
		specs = append(specs, e.tools[name].Spec())
	}
	return specs
}

// Execute invokes the tool req names with the call's arguments.
//
// It returns a NOT_FOUND *tool.Error with no side effects when no tool of
// that name is held, an INTERNAL *tool.Error with unknown side effects when
// the tool panics, and otherwise whatever the tool's Invoke returns (see
// tool.Tool.Invoke): VALIDATION for undecodable arguments, or the tool's
// own result or error.
func (e *Executor) Execute(ctx context.Context, req *executors.Request) (res *tool.Result, err error) {
	name := cmp.Or(req.Spec.GetNative().GetFunction(), req.Spec.GetName(), req.Call.GetTool())
	e.mu.RLock()
	t := e.tools[name]
	e.mu.RUnlock()
	if t == nil {
		return nil, &tool.Error{
			Type:        toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND,
			Message:     fmt.Sprintf("no native tool %q in this worker", name),
			SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE,
		}
	}
	defer func() {
		if r := recover(); r != nil {
			// A panic value may quote a secret argument (internal/redact).
			sec := redact.ForSpec(req.Spec).Secrets(req.Call.GetArguments())
			e.log.ErrorContext(ctx, "native tool panicked",
				"tool", name, "call_id", req.Call.GetCallId(), "attempt", req.Call.GetAttempt(),
				"panic", sec.String(fmt.Sprint(r)), "stack", string(debug.Stack()))
			res, err = nil, &tool.Error{
				Type:        toolwirev1.ErrorType_ERROR_TYPE_INTERNAL,
				Message:     sec.String(fmt.Sprintf("tool panicked: %v", r)),
				SideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNKNOWN,
			}
		}
	}()
	return t.Invoke(ctx, req.Call.GetArguments())
}
