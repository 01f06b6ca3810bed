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

// Refusal is one intent of a response that Screen refused, and why.
type Refusal struct {
	// Index is the intent's position in the response, from 0.
	Index  int
	Intent *toolwirev1.Intent
	// Reason says why, for a person: "type not declared by the tool
	// (declared: none)".
	Reason string
}

// Screen checks, one at a time, the intents a tool returned against the
// intent catalog and its spec: each type is a catalog type or a
// namespaced custom one (CheckType) and is declared by the spec (a nil
// spec declares none), each id is present and unique, each payload is a
// JSON object (or absent) and, for built-in types, matches the type's
// schema, and at most MaxPerResponse of them come before it. It returns
// the intents that pass, in order, and the others, each with its reason.
// The worker (Check) and the applier (Applier.Apply) both screen with it.
func Screen(spec *toolwirev1.ToolSpec, in []*toolwirev1.Intent) ([]*toolwirev1.Intent, []Refusal) {
	valid := make([]*toolwirev1.Intent, 0, min(len(in), MaxPerResponse))
	var refused []Refusal
	ids := make(map[string]bool, len(in))
	for i, it := range in {
		var why []string
		if i >= MaxPerResponse {
			why = append(why, fmt.Sprintf("one of %d intents; at most %d per response", len(in), MaxPerResponse))
		}
		switch {
		case it.GetId() == "":
			why = append(why, "no id")
		case ids[it.GetId()]:
			why = append(why, fmt.Sprintf("id %q repeated", it.GetId()))
		}
		ids[it.GetId()] = true
		why = append(why, typeAndPayload(spec, it)...)
		if len(why) > 0 {
			refused = append(refused, Refusal{Index: i, Intent: it, Reason: strings.Join(why, "; ")})
			continue
		}
		valid = append(valid, it)
	}
	return valid, refused
}

// typeAndPayload says what is wrong with one intent's type and payload.
func typeAndPayload(spec *toolwirev1.ToolSpec, it *toolwirev1.Intent) []string {
	if err := CheckType(it.GetType()); err != nil {
		return []string{"not in the intent catalog: " + err.Error()}
	}
	if !slices.Contains(spec.GetIntents(), it.GetType()) {
		return []string{fmt.Sprintf("type not declared by the tool (declared: %s)", declared(spec))}
	}
	if err := checkPayload(it); err != nil {
		return []string{err.Error()}
	}
	return nil
}

// RefuseAll refuses every intent of in with one reason: the applier's
// answer when the spec to screen them against cannot be found.
func RefuseAll(in []*toolwirev1.Intent, reason string) []Refusal {
	refused := make([]Refusal, len(in))
	for i, it := range in {
		refused[i] = Refusal{Index: i, Intent: it, Reason: reason}
	}
	return refused
}

// Check validates the intents a tool returned against its spec (Screen):
// nil when every one passes, else every refusal, wrapped around
// ErrViolation.
func Check(spec *toolwirev1.ToolSpec, in []*toolwirev1.Intent) error {
	_, refused := Screen(spec, in)
	if len(refused) == 0 {
		return nil
	}
	errs := make([]error, len(refused))
	for i, r := range refused {
		errs[i] = fmt.Errorf("intent %d (%s): %s", r.Index+1, r.Intent.GetType(), r.Reason)
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
