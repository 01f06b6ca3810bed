package tool

import (
	"context"
	"encoding/json"
	"fmt"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Methods a tool may ask its caller to answer (MCP client requests).
const (
	// MethodElicit asks the caller's user for information (a form).
	MethodElicit = "elicitation/create"
	// MethodSample asks the caller's model for a completion.
	MethodSample = "sampling/createMessage"
	// MethodListRoots asks for the caller's roots (directories, projects).
	MethodListRoots = "roots/list"
)

// Limits of an input-required answer; the worker refuses one beyond them
// (an INTERNAL error of the tool).
const (
	// MaxInputRequests bounds the requests of one answer.
	MaxInputRequests = 64
	// MaxInputStateBytes bounds the state of one answer.
	MaxInputStateBytes = 64 << 10
	// MaxInputParamsBytes bounds the params of all the requests of one
	// answer together.
	MaxInputParamsBytes = 128 << 10
)

// Input is a tool's answer that it needs its caller's input before it can
// finish (MCP's input-required result, SEP-2322). The call ends with it;
// the caller answers with a new call of the same tool and arguments that
// continues this one, and the tool, called again, finds the answers and
// its State with InputFrom. Return it with NeedInput.
type Input struct {
	// Requests by keys the tool chooses; the answers come back under them.
	Requests map[string]InputRequest
	// State is the tool's own, handed back with the answers. The caller
	// holds only the call id and cannot alter it, but it is stored with
	// the response, which the tenant's callers can read: it must hold no
	// secret. At most MaxInputStateBytes.
	State []byte
}

// InputRequest is one thing to ask: a method (MethodElicit, MethodSample,
// MethodListRoots) and its params as a JSON object.
type InputRequest struct {
	Method string
	Params json.RawMessage
}

// NeedInput returns the Result that asks the caller for input.
func NeedInput(requests map[string]InputRequest, state []byte) *Result {
	return &Result{Input: &Input{Requests: requests, State: state}}
}

// Elicit asks the caller's user for information: message is shown, and
// the answer is an object of schema (a flat JSON Schema object of
// primitive properties, as MCP's elicitation allows).
func Elicit(message string, schema any) InputRequest {
	return request(MethodElicit, map[string]any{"message": message, "requestedSchema": schema})
}

// Sample asks the caller's model to answer prompt, in at most maxTokens.
func Sample(prompt string, maxTokens int) InputRequest {
	return request(MethodSample, map[string]any{
		"messages":  []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": prompt}}},
		"maxTokens": maxTokens,
	})
}

// ListRoots asks for the caller's roots.
func ListRoots() InputRequest { return request(MethodListRoots, map[string]any{}) }

func request(method string, params any) InputRequest {
	b, err := json.Marshal(params)
	if err != nil {
		panic(fmt.Sprintf("tool: input request params: %v", err)) // only a schema that does not encode
	}
	return InputRequest{Method: method, Params: b}
}

// Answers are what a call that continues an exchange brings its tool: the
// caller's answers by the keys the tool asked under, and the State it
// returned with them.
type Answers struct {
	// PreviousCallID is the call whose answer asked for the input.
	PreviousCallID string
	// Responses by key, each a JSON object (an MCP ElicitResult,
	// CreateMessageResult or ListRootsResult). Keys not asked for are not
	// passed; a key asked for may be missing.
	Responses map[string]json.RawMessage
	State     []byte
}

// Elicited decodes the content of an elicitation's answer under key into
// v. It reports false when there is no answer under key or the user did
// not accept (declined or cancelled the form).
func (a *Answers) Elicited(key string, v any) (bool, error) {
	raw, ok := a.Responses[key]
	if !ok {
		return false, nil
	}
	var r struct {
		Action  string          `json:"action"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return false, InvalidArgument("inputResponses."+key, "not an elicitation result: "+err.Error())
	}
	if r.Action != "accept" {
		return false, nil
	}
	if len(r.Content) == 0 {
		r.Content = []byte("{}")
	}
	if err := json.Unmarshal(r.Content, v); err != nil {
		return false, InvalidArgument("inputResponses."+key+".content", err.Error())
	}
	return true, nil
}

// InputFrom returns the answers the call ctx runs brings; nil when it
// brings none. Answers with a PreviousCallID answer that call's requests,
// and State is the tool's own from it, both checked by the dispatcher;
// answers without one (a caller that sent no request state, which MCP
// allows) are the caller's word alone, with no State: a tool that must
// know it asked — a confirmation before a destructive act — checks State.
func InputFrom(ctx context.Context) *Answers {
	info, ok := CallInfoFrom(ctx)
	if !ok || info.Input == nil {
		return nil
	}
	in := info.Input
	a := &Answers{PreviousCallID: in.GetPreviousCallId(), State: in.GetState(), Responses: map[string]json.RawMessage{}}
	for k, v := range in.GetResponsesJson() {
		a.Responses[k] = json.RawMessage(v)
	}
	return a
}

// ClientCan reports whether the caller declared it can answer method
// (MethodElicit, MethodSample, MethodListRoots): ask only for what it can
// give. A caller that declared nothing can answer nothing.
func ClientCan(ctx context.Context, method string) bool {
	info, ok := CallInfoFrom(ctx)
	if !ok || info.ClientCapabilities == "" {
		return false
	}
	var caps map[string]json.RawMessage
	if json.Unmarshal([]byte(info.ClientCapabilities), &caps) != nil {
		return false
	}
	_, ok = caps[CapabilityFor(method)]
	return ok
}

// CapabilityFor is the client capability that answers method
// ("elicitation", "sampling", "roots"); empty for any other.
func CapabilityFor(method string) string {
	switch method {
	case MethodElicit:
		return "elicitation"
	case MethodSample:
		return "sampling"
	case MethodListRoots:
		return "roots"
	}
	return ""
}

// Proto is the input's wire form, checked against the limits: at least
// one request, at most MaxInputRequests, each of a known method with
// params that are a JSON object, and a state of at most
// MaxInputStateBytes.
func (in *Input) Proto() (*toolwirev1.InputRequired, error) {
	if len(in.Requests) == 0 {
		return nil, fmt.Errorf("tool: an input-required answer needs at least one request")
	}
	if len(in.Requests) > MaxInputRequests {
		return nil, fmt.Errorf("tool: %d input requests, at most %d", len(in.Requests), MaxInputRequests)
	}
	if len(in.State) > MaxInputStateBytes {
		return nil, fmt.Errorf("tool: input state of %d bytes, at most %d", len(in.State), MaxInputStateBytes)
	}
	out := &toolwirev1.InputRequired{Requests: make(map[string]*toolwirev1.InputRequest, len(in.Requests)), State: in.State}
	total := 0
	for k, r := range in.Requests {
		if total += len(r.Params); total > MaxInputParamsBytes {
			return nil, fmt.Errorf("tool: the input requests' params are over %d bytes", MaxInputParamsBytes)
		}
		if k == "" || len(k) > 128 {
			return nil, fmt.Errorf("tool: input request key %q: 1 to 128 bytes", k)
		}
		if CapabilityFor(r.Method) == "" {
			return nil, fmt.Errorf("tool: input request %q: unknown method %q (want %s, %s or %s)", k, r.Method, MethodElicit, MethodSample, MethodListRoots)
		}
		params := r.Params
		if len(params) == 0 {
			params = json.RawMessage("{}")
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(params, &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("tool: input request %q: params must be a JSON object", k)
		}
		out.Requests[k] = &toolwirev1.InputRequest{Method: r.Method, ParamsJson: string(params)}
	}
	return out, nil
}
