package dispatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolwire/toolwire/internal/registry"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// errBothArgumentForms refuses a request that carries arguments twice:
// whichever form won, the caller could not tell which one ran.
var errBothArgumentForms = errors.New("arguments and arguments_json are both set; send one of them")

// argumentBytes returns the exact JSON of the call's arguments: the raw
// string when given (byte for byte), else the encoded object, else {}. A
// request with both forms is refused.
func argumentBytes(o *toolwirev1.CallRequest) ([]byte, error) {
	if o.ArgumentsJson != "" {
		if o.Arguments != nil {
			return nil, errBothArgumentForms
		}
		return []byte(o.ArgumentsJson), nil
	}
	if o.Arguments != nil {
		b, err := protojson.Marshal(o.Arguments)
		if err != nil {
			return nil, fmt.Errorf("arguments: %w", err)
		}
		return b, nil
	}
	return []byte("{}"), nil
}

// arguments is the step that takes the call's arguments (argumentBytes)
// and checks them (registry.CheckArgs) against the size and nesting limits
// (the tool spec's, else the Config's), the count of members and elements
// (Config.MaxArgsValues), and the tool's input schema. A hook's own call
// is not held to MaxArgsValues: its arguments are the dispatcher's
// request, holding the hooked call's arguments and, for an after-hook, its
// whole response, which no such count limits (the bytes and the nesting
// still bound it: the hook tool's spec may raise them).
func (a *admission) arguments(ctx context.Context) verdict {
	d := a.d
	args, err := argumentBytes(a.req)
	if err != nil {
		return a.refused(registry.Violation("", err.Error()), nil)
	}
	if te := d.checkArgs(ctx, a.entry, args); te != nil {
		return a.refused(te, nil)
	}
	a.args = args
	return next
}

// checkArgs checks arguments as the arguments step does; a before-hook's
// rewrite is checked again with it.
func (d *Dispatcher) checkArgs(ctx context.Context, ent *registry.Entry, args []byte) *toolwirev1.ToolError {
	l := registry.ArgLimits{MaxBytes: d.cfg.MaxArgsBytes, MaxDepth: d.cfg.MaxArgsDepth, MaxValues: d.cfg.MaxArgsValues}
	if isHookCall(ctx) {
		l.MaxValues = 0
	}
	return registry.CheckArgs(ent, args, l)
}
