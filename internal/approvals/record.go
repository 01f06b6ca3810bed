package approvals

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolwire/toolwire/internal/policy"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// Record is one approval: a call an ask decision parked, and what became
// of it. It is stored at CallKey(tenant, id), where id is the call's id.
type Record struct {
	// Approval is what approvers, events and the audit see: state, tool,
	// caller, the arguments redacted, the decision that asked, and who
	// decided what. Approval.Id is the call's id.
	Approval *toolwirev1.Approval
	// Call is the parked call as it is to be published (its arguments
	// exactly as the caller sent them; no approval token). Approve stamps
	// its deadlines afresh and its approval id.
	Call *toolwirev1.ToolCall
	// ScheduleToStart and ScheduleToClose are the call's timeouts (0 =
	// none), stamped as deadlines from the moment it is approved: the
	// time a person takes to decide does not count against them.
	ScheduleToStart, ScheduleToClose time.Duration
	// Nonce is consumed (a KV create of NonceKey naming the call) by the
	// approval that lets the call run: once only, whoever approves.
	Nonce string
	// Binding is the approval the worker re-checks before executing
	// (tenant, agent, session, tool, spec version, arguments' SHA-256,
	// expiry, approver, nonce); set when the record is approved.
	Binding *policy.Approval
	// Published: for an approved record, the call is on the calls stream;
	// for a denied or expired one, its terminal answer is on the results
	// stream. A decided record that is not published is finished by the
	// sweep (doc.go, "Crash safety").
	Published bool
	// CancelledBy is set when the record was denied because its caller
	// cancelled the parked call (who cancelled): its answer is CANCELLED,
	// not PERMISSION_DENIED.
	CancelledBy string
	// PolicyDenied is set when the record was denied because the policy
	// in force denies the parked call (a change of policy after it was
	// parked): why, naming the rule. Its answer says so, not "an
	// approver denied".
	PolicyDenied string
	// DeniedAs is, for a PolicyDenied record, the error type its call is
	// answered with, by name: "" for PERMISSION_DENIED (the policy in
	// force denies it), "MODE_RESTRICTED" (its session's mode now forbids
	// it) or "SESSION_INACTIVE" (its session ended while it waited).
	DeniedAs string
	// Revision is the stored revision the record was read at (the
	// compare-and-set of Update); 0 for a record not stored yet.
	Revision uint64
}

// Tenant is the record's tenant (its call's caller's).
func (r *Record) Tenant() string { return r.Call.GetCaller().GetTenant() }

// ID is the record's id: the parked call's id.
func (r *Record) ID() string { return r.Approval.GetId() }

// Decided reports whether the record left PENDING.
func (r *Record) Decided() bool {
	return r.Approval.GetState() != toolwirev1.ApprovalState_APPROVAL_STATE_PENDING
}

// recordFormat is the version of the stored form; a record of another
// version is refused (an older binary reading a newer record).
const recordFormat = 1

// stored is a record as the bucket holds it: JSON, with the two protobuf
// messages in their binary form.
type stored struct {
	Format          int              `json:"v"`
	Approval        []byte           `json:"approval"`
	Call            []byte           `json:"call"`
	ScheduleToStart time.Duration    `json:"schedule_to_start_ns,omitempty"`
	ScheduleToClose time.Duration    `json:"schedule_to_close_ns,omitempty"`
	Nonce           string           `json:"nonce"`
	Binding         *policy.Approval `json:"binding,omitempty"`
	Published       bool             `json:"published,omitempty"`
	CancelledBy     string           `json:"cancelled_by,omitempty"`
	PolicyDenied    string           `json:"policy_denied,omitempty"`
	DeniedAs        string           `json:"denied_as,omitempty"`
}

func (r *Record) encode() ([]byte, error) {
	a, err := proto.Marshal(r.Approval)
	if err != nil {
		return nil, fmt.Errorf("approvals: encode approval: %w", err)
	}
	c, err := proto.Marshal(r.Call)
	if err != nil {
		return nil, fmt.Errorf("approvals: encode call: %w", err)
	}
	return json.Marshal(stored{Format: recordFormat, Approval: a, Call: c, ScheduleToStart: r.ScheduleToStart,
		ScheduleToClose: r.ScheduleToClose, Nonce: r.Nonce, Binding: r.Binding, Published: r.Published, CancelledBy: r.CancelledBy, PolicyDenied: r.PolicyDenied,
		DeniedAs: r.DeniedAs})
}

// decodeRecord decodes a stored record read at revision rev.
func decodeRecord(data []byte, rev uint64) (*Record, error) {
	var s stored
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if s.Format != recordFormat {
		return nil, fmt.Errorf("%w: format %d, want %d", ErrCorrupt, s.Format, recordFormat)
	}
	r := &Record{Approval: &toolwirev1.Approval{}, Call: &toolwirev1.ToolCall{}, ScheduleToStart: s.ScheduleToStart,
		ScheduleToClose: s.ScheduleToClose, Nonce: s.Nonce, Binding: s.Binding, Published: s.Published, CancelledBy: s.CancelledBy, PolicyDenied: s.PolicyDenied,
		DeniedAs: s.DeniedAs, Revision: rev}
	if err := proto.Unmarshal(s.Approval, r.Approval); err != nil {
		return nil, fmt.Errorf("%w: approval: %w", ErrCorrupt, err)
	}
	if err := proto.Unmarshal(s.Call, r.Call); err != nil {
		return nil, fmt.Errorf("%w: call: %w", ErrCorrupt, err)
	}
	return r, nil
}

// The headers every write of a record carries, so that listings and the
// sweep read a record's summary without its body (a headers-only
// consumer): state, tool, agent and session (base64url: a session is any
// string), the pending expiry and the decision time (Unix milliseconds),
// and whether a decided record is published.
const (
	hdrState     = "Toolwire-Approval-State"
	hdrTool      = "Toolwire-Approval-Tool"
	hdrAgent     = "Toolwire-Approval-Agent"
	hdrSession   = "Toolwire-Approval-Session"
	hdrExpires   = "Toolwire-Approval-Expires"
	hdrDecided   = "Toolwire-Approval-Decided"
	hdrPublished = "Toolwire-Approval-Published"
)

// Summary is what the headers of a record say: enough to filter a listing
// and to find the records the sweep must act on.
type Summary struct {
	Tenant, ID           string
	State                toolwirev1.ApprovalState
	Tool, Agent, Session string
	Expires, Decided     time.Time
	Published            bool
	// Revision is the stream sequence of the record's write.
	Revision uint64
}

func (r *Record) headers(h nats.Header) {
	a := r.Approval
	h.Set(hdrState, stateName(a.GetState()))
	h.Set(hdrTool, b64(a.GetTool()))
	h.Set(hdrAgent, b64(a.GetCaller().GetAgent()))
	h.Set(hdrSession, b64(a.GetCaller().GetSession()))
	h.Set(hdrExpires, strconv.FormatInt(a.GetExpiresAt().AsTime().UnixMilli(), 10))
	if a.GetDecidedAt() != nil {
		h.Set(hdrDecided, strconv.FormatInt(a.GetDecidedAt().AsTime().UnixMilli(), 10))
	}
	if r.Published {
		h.Set(hdrPublished, "1")
	}
}

// summaryOf reads the summary of the record stored at key from the
// headers of its write; ok is false for a message that is no record (a
// deletion or TTL marker, a malformed key or header).
func summaryOf(key string, h nats.Header, rev uint64) (Summary, bool) {
	tenant, id, ok := parseKey(key, callPrefix)
	if !ok || h.Get(hdrState) == "" {
		return Summary{}, false
	}
	s := Summary{Tenant: tenant, ID: id, State: parseState(h.Get(hdrState)), Published: h.Get(hdrPublished) == "1", Revision: rev}
	var err error
	if s.Tool, err = unb64(h.Get(hdrTool)); err != nil {
		return Summary{}, false
	}
	if s.Agent, err = unb64(h.Get(hdrAgent)); err != nil {
		return Summary{}, false
	}
	if s.Session, err = unb64(h.Get(hdrSession)); err != nil {
		return Summary{}, false
	}
	s.Expires = millis(h.Get(hdrExpires))
	s.Decided = millis(h.Get(hdrDecided))
	return s, s.State != toolwirev1.ApprovalState_APPROVAL_STATE_UNSPECIFIED
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func unb64(s string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return string(b), err
}

func millis(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// stateName is the short name of a state: PENDING, APPROVED, DENIED,
// EXPIRED.
func stateName(s toolwirev1.ApprovalState) string {
	return strings.TrimPrefix(s.String(), "APPROVAL_STATE_")
}

// parseState is the inverse of stateName; UNSPECIFIED for anything else.
func parseState(s string) toolwirev1.ApprovalState {
	v, ok := toolwirev1.ApprovalState_value["APPROVAL_STATE_"+s]
	if !ok {
		return toolwirev1.ApprovalState_APPROVAL_STATE_UNSPECIFIED
	}
	return toolwirev1.ApprovalState(v)
}
