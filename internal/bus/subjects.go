package bus

import (
	"slices"
	"strconv"
	"strings"
	"unicode"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// TenantPattern is the rule tenant names follow. Tenants become subject
// tokens and KV keys as they are, so the rule keeps them valid and
// injective there: no `.`, `*`, `>`, `:`, white space or non-ASCII. A
// tenant name that breaks it is refused wherever it enters (API keys, raw
// calls at the worker, audit and DLQ filters), never mapped to a token:
// mapping would make two tenants share one (`a.b` and `a_b`).
const TenantPattern = `^[A-Za-z0-9_-]{1,64}$`

// ValidTenant reports whether tenant follows TenantPattern (without a
// regular expression: it is checked on every call).
func ValidTenant(tenant string) bool { return PlainToken(tenant, 64) }

// PlainToken reports whether s is 1 to max bytes of letters, digits, _
// and - (TenantPattern's alphabet): safe as it is in a subject token and
// a KV key.
func PlainToken(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// Token makes s safe as one subject token: `.`, `*`, `>`, white space and
// control characters become `_`, and an empty string becomes `_`.
func Token(s string) string {
	if s == "" {
		return "_"
	}
	clean := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			clean = false // decide rune by rune below
			break
		}
		if c == '.' || c == '*' || c == '>' || c <= ' ' || c == 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	clean = true
	for _, r := range s {
		if badTokenRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	return strings.Map(func(r rune) rune {
		if badTokenRune(r) {
			return '_'
		}
		return r
	}, s)
}

func badTokenRune(r rune) bool {
	return r == '.' || r == '*' || r == '>' || unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar
}

// TypeToken is the subject token of an executor type: native, mcp, sandbox,
// http.
func TypeToken(t toolwirev1.ExecutorType) string {
	switch t {
	case toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE:
		return "native"
	case toolwirev1.ExecutorType_EXECUTOR_TYPE_MCP:
		return "mcp"
	case toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX:
		return "sandbox"
	case toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP:
		return "http"
	}
	return "unknown"
}

// ParseType is the inverse of TypeToken; ok is false for unknown names.
func ParseType(s string) (toolwirev1.ExecutorType, bool) {
	switch strings.ToLower(s) {
	case "native":
		return toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, true
	case "mcp":
		return toolwirev1.ExecutorType_EXECUTOR_TYPE_MCP, true
	case "sandbox":
		return toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX, true
	case "http":
		return toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP, true
	}
	return toolwirev1.ExecutorType_EXECUTOR_TYPE_UNSPECIFIED, false
}

// AllTypes lists every executor type, in subject order.
func AllTypes() []toolwirev1.ExecutorType {
	return []toolwirev1.ExecutorType{
		toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE,
		toolwirev1.ExecutorType_EXECUTOR_TYPE_MCP,
		toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX,
		toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP,
	}
}

// Subjects builds every subject of one installation (one prefix).
type Subjects struct {
	Prefix string
}

func (s Subjects) join(parts ...string) string {
	n := len(s.Prefix) + len(parts)
	for _, p := range parts {
		n += len(p)
	}
	var b strings.Builder // one allocation: subjects are built per call
	b.Grow(n)
	b.WriteString(s.Prefix)
	for _, p := range parts {
		b.WriteByte('.')
		b.WriteString(p)
	}
	return b.String()
}

// Call is the subject of a call: <prefix>.call.<type>.<tenant>.<provider>.<tool>.
func (s Subjects) Call(t toolwirev1.ExecutorType, tenant, provider, tool string) string {
	return s.join("call", TypeToken(t), Token(tenant), Token(provider), Token(tool))
}

// IsCall reports whether subject is Call(t, tenant, provider, tool) or
// Shadow(t, tenant, provider, tool), without building either.
func (s Subjects) IsCall(subject string, t toolwirev1.ExecutorType, tenant, provider, tool string) bool {
	rest, ok := strings.CutPrefix(subject, s.Prefix+".")
	if !ok {
		return false
	}
	kind, rest, _ := strings.Cut(rest, ".")
	if kind != "call" && kind != "shadow" {
		return false
	}
	for _, want := range [...]string{TypeToken(t), Token(tenant), Token(provider)} {
		var tok string
		tok, rest, ok = strings.Cut(rest, ".")
		if !ok || tok != want {
			return false
		}
	}
	return rest == Token(tool)
}

// CallsOfType filters the calls of one executor type.
func (s Subjects) CallsOfType(t toolwirev1.ExecutorType) string {
	return s.join("call", TypeToken(t), ">")
}

// CallsOf filters the calls of a tenant and/or a tool; an empty argument
// matches any.
func (s Subjects) CallsOf(tenant, tool string) string {
	tok := func(v string) string {
		if v == "" {
			return "*"
		}
		return Token(v)
	}
	return s.join("call", "*", tok(tenant), "*", tok(tool))
}

// Shadow is the subject of a replayed call, which only shadow pools
// consume: <prefix>.shadow.<type>.<tenant>.<provider>.<tool>.
func (s Subjects) Shadow(t toolwirev1.ExecutorType, tenant, provider, tool string) string {
	return s.join("shadow", TypeToken(t), Token(tenant), Token(provider), Token(tool))
}

// ShadowOfType filters the replayed calls of one executor type.
func (s Subjects) ShadowOfType(t toolwirev1.ExecutorType) string {
	return s.join("shadow", TypeToken(t), ">")
}

// AllShadow filters every replayed call.
func (s Subjects) AllShadow() string { return s.join("shadow", ">") }

// AllCalls filters every call.
func (s Subjects) AllCalls() string { return s.join("call", ">") }

// RetrySchedule is the subject of the schedule of a call's retry.
func (s Subjects) RetrySchedule(callID string, attempt int32) string {
	return s.join("retry", "sched", Token(callID), strconv.Itoa(int(attempt)))
}

// RetryDue is where a call's retry lands when its schedule fires.
func (s Subjects) RetryDue(callID string, attempt int32) string {
	return s.join("retry", "due", Token(callID), strconv.Itoa(int(attempt)))
}

// DueRetries filters every due retry.
func (s Subjects) DueRetries() string { return s.join("retry", "due", ">") }

// AllRetries filters the retries stream.
func (s Subjects) AllRetries() string { return s.join("retry", ">") }

// Result is the subject of a call's terminal response.
func (s Subjects) Result(tenant, dispatcher, callID string) string {
	return s.join("result", Token(tenant), Token(dispatcher), Token(callID))
}

// ResultAnyDispatcher matches the result of a call whatever dispatcher
// routed it; used for direct gets by call id.
func (s Subjects) ResultAnyDispatcher(tenant, callID string) string {
	return s.join("result", Token(tenant), "*", Token(callID))
}

// ResultsOf matches every result routed to one dispatcher.
func (s Subjects) ResultsOf(dispatcher string) string {
	return s.join("result", "*", Token(dispatcher), "*")
}

// AllResults filters every result.
func (s Subjects) AllResults() string { return s.join("result", ">") }

// Event is the subject of a call's lifecycle events.
func (s Subjects) Event(tenant, dispatcher, callID string) string {
	return s.join("event", Token(tenant), Token(dispatcher), Token(callID))
}

// EventsOfResult matches the events, on every dispatcher's subject, of
// the call whose result subject is result (Result's, whatever dispatcher
// token it names: a result stored under another token is still that
// call's); false when result is not one.
func (s Subjects) EventsOfResult(result string) (string, bool) {
	rest, ok := strings.CutPrefix(result, s.Prefix+".result.")
	parts := strings.Split(rest, ".")
	if !ok || len(parts) != 3 || slices.Contains(parts, "") || strings.ContainsAny(rest, "*>") {
		return "", false
	}
	return s.join("event", parts[0], "*", parts[2]), true
}

// EventsAnyDispatcher matches the events of a call whatever dispatcher
// routed it.
func (s Subjects) EventsAnyDispatcher(tenant, callID string) string {
	return s.join("event", Token(tenant), "*", Token(callID))
}

// AllEvents filters every event.
func (s Subjects) AllEvents() string { return s.join("event", ">") }

// DLQ is the subject of a dead letter.
func (s Subjects) DLQ(t toolwirev1.ExecutorType, tenant, provider, tool string) string {
	return s.join("dlq", TypeToken(t), Token(tenant), Token(provider), Token(tool))
}

// AllDLQ filters every dead letter.
func (s Subjects) AllDLQ() string { return s.join("dlq", ">") }

// DelegationChildren is the counter of the calls made on behalf of call
// parent of tenant: <prefix>.delegation.children.<tenant>.<parent>.
func (s Subjects) DelegationChildren(tenant, parent string) string {
	return s.join("delegation", "children", Token(tenant), Token(parent))
}

// DelegationDescendants is the counter of the calls of the delegation
// chain below call root of tenant:
// <prefix>.delegation.descendants.<tenant>.<root>.
func (s Subjects) DelegationDescendants(tenant, root string) string {
	return s.join("delegation", "descendants", Token(tenant), Token(root))
}

// AllDelegation filters every delegation counter.
func (s Subjects) AllDelegation() string { return s.join("delegation", ">") }

// CancelKey is the cancel bucket key of a call.
func CancelKey(tenant, callID string) string { return Token(tenant) + "." + Token(callID) }
