package intents

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ErrViolation is matched by every error Check returns.
var ErrViolation = errors.New("intent violation")

// MaxPerResponse bounds the intents of one response.
const MaxPerResponse = 64

// MaxPayloadBytes bounds one intent's payload.
const MaxPayloadBytes = 64 << 10

// Check validates the intents a tool returned against its spec: each type
// is declared by the spec, each id is present and unique, each payload is a
// JSON object (or absent) and, for built-in types, matches the type's
// schema. It returns every problem, wrapped around ErrViolation.
func Check(spec *toolwirev1.ToolSpec, in []*toolwirev1.Intent) error {
	if len(in) == 0 {
		return nil
	}
	var errs []error
	if len(in) > MaxPerResponse {
		errs = append(errs, fmt.Errorf("%d intents; at most %d per response", len(in), MaxPerResponse))
	}
	ids := make(map[string]bool, len(in))
	for i, it := range in {
		where := fmt.Sprintf("intent %d (%s)", i+1, it.GetType())
		switch {
		case it.GetId() == "":
			errs = append(errs, fmt.Errorf("%s: no id", where))
		case ids[it.GetId()]:
			errs = append(errs, fmt.Errorf("%s: id %q repeated", where, it.GetId()))
		}
		ids[it.GetId()] = true
		if !slices.Contains(spec.GetIntents(), it.GetType()) {
			errs = append(errs, fmt.Errorf("%s: type not declared by the tool (declared: %s)", where, declared(spec)))
			continue
		}
		if err := checkPayload(it); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrViolation, errors.Join(errs...))
}

func declared(spec *toolwirev1.ToolSpec) string {
	if len(spec.GetIntents()) == 0 {
		return "none"
	}
	return strings.Join(spec.GetIntents(), ", ")
}

func checkPayload(it *toolwirev1.Intent) error {
	p := it.GetPayloadJson()
	if len(p) > MaxPayloadBytes {
		return fmt.Errorf("payload of %d bytes; at most %d", len(p), MaxPayloadBytes)
	}
	if p == "" {
		p = "{}"
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(p), &obj); err != nil || obj == nil {
		return errors.New("payload is not a JSON object")
	}
	sch := builtinSchemas()[it.GetType()]
	if sch == nil {
		return nil
	}
	if v := registry.ValidateArgs(sch, []byte(p)); len(v) > 0 {
		msgs := make([]string, len(v))
		for i, fv := range v {
			msgs[i] = fmt.Sprintf("%s: %s", cmpField(fv.Field), fv.Message)
		}
		return fmt.Errorf("payload invalid: %s", strings.Join(msgs, "; "))
	}
	return nil
}

func cmpField(f string) string {
	if f == "" {
		return "payload"
	}
	return "payload" + f
}

// CheckSpec validates the intent types a spec declares.
func CheckSpec(spec *toolwirev1.ToolSpec) error {
	var errs []error
	for _, t := range spec.GetIntents() {
		if err := CheckType(t); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
