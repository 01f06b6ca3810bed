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
	args, err := argumentBytes(a.req)
	if err != nil {
		return a.refused(registry.Violation("", err.Error()), nil)
	}
	doc, te := registry.CheckedArgs(a.entry, args, a.d.argLimits(ctx))
	if te != nil {
		return a.refused(te, nil)
	}
	a.args, a.doc = args, doc
	return next
}

// argLimits are the limits the arguments step checks a call's arguments
// against; a hook's own call is not held to MaxArgsValues.
func (d *Dispatcher) argLimits(ctx context.Context) registry.ArgLimits {
	l := registry.ArgLimits{MaxBytes: d.cfg.MaxArgsBytes, MaxDepth: d.cfg.MaxArgsDepth, MaxValues: d.cfg.MaxArgsValues}
	if isHookCall(ctx) {
		l.MaxValues = 0
	}
	return l
}
