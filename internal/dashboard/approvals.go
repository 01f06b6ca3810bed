package dashboard

// Approvals: the inbox of calls an ask decision parked, and the approver's
// decisions (approve once or as a grant, deny with a reason).
//
// Decisions where the issue was silent:
//   - Everything goes through the dispatcher as the viewer (v.ID): it
//     checks the approve scope and the tenant, and records the approver.
//     The inbox is therefore the viewer's own tenant's, for admins too,
//     and a key without the approve scope is shown why the inbox is empty
//     rather than someone else's view of it.
//   - Arguments are shown as ListApprovals gives them: redacted by the
//     dispatcher (the spec's secret fields).
//   - The page shows up to maxInbox pending approvals and the
//     maxDecided latest decisions, newest first as the dispatcher lists them.
//   - A grant's options are the ApproveRequest's: the scope (session,
//     agent or tenant), a ttl, a tool glob and argument patterns (one
//     "path=glob" a line); the dispatcher validates them.

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/approvalflow"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Bounds of the approvals page and its forms.
const (
	maxInbox        = 200
	maxDecided      = 50
	maxReasonLen    = 1000
	maxArgsPatterns = 64
	maxPatternLen   = 512
)

// approvalRow is one approval as the page shows it.
type approvalRow struct {
	*toolwirev1.Approval
	Args string // pretty, already redacted by the dispatcher
}

// State is the approval's state's short name (pending, approved, ...).
func (a approvalRow) State() string {
	return strings.ToLower(strings.TrimPrefix(a.GetState().String(), "APPROVAL_STATE_"))
}

// Scope is how it was approved (once, session, ...); "" when it was not.
func (a approvalRow) Scope() string {
	if a.GetScope() == toolwirev1.ApprovalScope_APPROVAL_SCOPE_UNSPECIFIED {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(a.GetScope().String(), "APPROVAL_SCOPE_"))
}

type approvalsData struct {
	Pending, Decided []approvalRow
	Truncated        bool
	NotApprover      bool
	Done, Error      string
}

// approvalsPage shows the approval inbox of the viewer's tenant.
func (s *Server) approvalsPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	d := approvalsData{Done: doneMessage(r)}
	if !v.Approver {
		d.NotApprover = true
		s.render(w, r, http.StatusOK, "approvals", v, "Approvals", "approvals", d)
		return
	}
	pending, truncated, err := s.cfg.Approvals.ListApprovals(r.Context(), v.ID, &toolwirev1.ListApprovalsRequest{
		State: toolwirev1.ApprovalState_APPROVAL_STATE_PENDING, Limit: maxInbox})
	status := http.StatusOK
	if err != nil {
		d.Error, status = "reading the approvals failed: "+err.Error(), http.StatusBadGateway
		s.render(w, r, status, "approvals", v, "Approvals", "approvals", d)
		return
	}
	d.Truncated = truncated
	for _, a := range pending {
		d.Pending = append(d.Pending, rowOfApproval(a))
	}
	recent, _, err := s.cfg.Approvals.ListApprovals(r.Context(), v.ID, &toolwirev1.ListApprovalsRequest{Limit: maxDecided + maxInbox})
	if err != nil {
		d.Error, status = "reading the decided approvals failed: "+err.Error(), http.StatusBadGateway
	}
	for _, a := range recent {
		if a.GetState() != toolwirev1.ApprovalState_APPROVAL_STATE_PENDING && len(d.Decided) < maxDecided {
			d.Decided = append(d.Decided, rowOfApproval(a))
		}
	}
	s.render(w, r, status, "approvals", v, "Approvals", "approvals", d)
}

func rowOfApproval(a *toolwirev1.Approval) approvalRow {
	row := approvalRow{Approval: a}
	if a.GetArgumentsJson() != "" {
		row.Args = prettyJSON([]byte(a.GetArgumentsJson()))
	}
	return row
}

// approvalID reads the {id} path value: an approval's id (its call's).
func approvalID(r *http.Request) (string, bool) {
	id := r.PathValue("id")
	return id, callIDRe.MatchString(id)
}

// approveCall approves a parked call: once (mode=once), or as a grant
// (mode=grant) with the grant's scope, ttl, tool glob and argument
// patterns.
func (s *Server) approveCall(w http.ResponseWriter, r *http.Request, v *viewer) {
	id, ok := approvalID(r)
	if !ok {
		s.refuse(w, r, v, http.StatusNotFound, "not an approval id")
		return
	}
	req, err := approveRequestOf(id, r.PostForm)
	if err != nil {
		s.refuse(w, r, v, http.StatusBadRequest, err.Error())
		return
	}
	a, g, err := s.cfg.Approvals.Approve(r.Context(), v.ID, req)
	if err != nil {
		s.refuseDecision(w, r, v, "approving", err)
		return
	}
	done := "approved " + a.GetTool() + " call " + id + " once"
	if g != nil {
		until := "no expiry"
		if g.GetExpiresAt() != nil {
			until = "until " + g.GetExpiresAt().AsTime().UTC().Format("2006-01-02 15:04 UTC")
		}
		done = fmt.Sprintf("approved %s call %s, and granted the %s's later calls of %s (grant %s, %s)", a.GetTool(), id,
			g.GetLayer(), g.GetTool(), g.GetId(), until)
	}
	s.log.Info("dashboard approval", "who", v.who(), "approval", id, "scope", req.GetScope().String())
	http.Redirect(w, r, Prefix+"/approvals?done="+url.QueryEscape(done), http.StatusSeeOther)
}

// approveRequestOf reads an approve form.
func approveRequestOf(id string, form url.Values) (*toolwirev1.ApproveRequest, error) {
	req := &toolwirev1.ApproveRequest{Id: id, Reason: strings.TrimSpace(form.Get("reason"))}
	if len(req.Reason) > maxReasonLen {
		return nil, fmt.Errorf("the reason is longer than %d bytes", maxReasonLen)
	}
	switch form.Get("mode") {
	case "", "once":
		req.Scope = toolwirev1.ApprovalScope_APPROVAL_SCOPE_ONCE
		return req, nil
	case "grant":
	default:
		return nil, errors.New(`mode: "once" or "grant"`)
	}
	switch form.Get("scope") {
	case "session":
		req.Scope = toolwirev1.ApprovalScope_APPROVAL_SCOPE_SESSION
	case "agent":
		req.Scope = toolwirev1.ApprovalScope_APPROVAL_SCOPE_AGENT
	case "tenant":
		req.Scope = toolwirev1.ApprovalScope_APPROVAL_SCOPE_TENANT
	default:
		return nil, errors.New(`a grant's scope: "session", "agent" or "tenant"`)
	}
	if ttl := strings.TrimSpace(form.Get("ttl")); ttl != "" {
		d, err := time.ParseDuration(ttl)
		if err != nil || d <= 0 {
			return nil, errors.New(`ttl: a duration such as "8h"`)
		}
		req.Ttl = durationpb.New(d)
	}
	if req.Tool = strings.TrimSpace(form.Get("tool")); len(req.Tool) > maxFilterBytes {
		return nil, fmt.Errorf("tool: longer than %d bytes", maxFilterBytes)
	}
	for line := range strings.Lines(form.Get("args")) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		path, glob, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(path) == "" || len(line) > maxPatternLen {
			return nil, fmt.Errorf("argument patterns: %.40q is not path=glob", line)
		}
		if req.ArgsPattern == nil {
			req.ArgsPattern = map[string]string{}
		}
		if req.ArgsPattern[strings.TrimSpace(path)] = strings.TrimSpace(glob); len(req.ArgsPattern) > maxArgsPatterns {
			return nil, fmt.Errorf("argument patterns: at most %d", maxArgsPatterns)
		}
	}
	return req, nil
}

// denyCall denies a parked call; the reason, required, is told its caller.
func (s *Server) denyCall(w http.ResponseWriter, r *http.Request, v *viewer) {
	id, ok := approvalID(r)
	if !ok {
		s.refuse(w, r, v, http.StatusNotFound, "not an approval id")
		return
	}
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	switch {
	case reason == "":
		s.refuse(w, r, v, http.StatusBadRequest, "a denial needs a reason: the caller is told it")
		return
	case len(reason) > maxReasonLen:
		s.refuse(w, r, v, http.StatusBadRequest, fmt.Sprintf("the reason is longer than %d bytes", maxReasonLen))
		return
	}
	a, err := s.cfg.Approvals.Deny(r.Context(), v.ID, id, reason)
	if err != nil {
		s.refuseDecision(w, r, v, "denying", err)
		return
	}
	s.log.Info("dashboard denial", "who", v.who(), "approval", id)
	http.Redirect(w, r, Prefix+"/approvals?done="+url.QueryEscape("denied "+a.GetTool()+" call "+id), http.StatusSeeOther)
}

// refuseDecision answers a decision the dispatcher refused.
func (s *Server) refuseDecision(w http.ResponseWriter, r *http.Request, v *viewer, what string, err error) {
	status := http.StatusBadGateway
	switch {
	case errors.Is(err, approvalflow.ErrNeedApproveScope):
		status = http.StatusForbidden
	case errors.Is(err, approvalflow.ErrUnknownApproval):
		status = http.StatusNotFound
	case errors.Is(err, approvalflow.ErrApprovalDecided), errors.Is(err, approvalflow.ErrPolicyDenies), errors.Is(err, approvalflow.ErrSessionInactive):
		status = http.StatusConflict
	case errors.Is(err, approvalflow.ErrBadApproval):
		status = http.StatusBadRequest
	}
	s.refuse(w, r, v, status, what+" failed: "+err.Error())
}

// parkedData is the page of a call parked for an approver: it has no
// record in the calls stream until it is approved, so its page is its
// approval's.
type parkedData struct {
	Approval approvalRow
}

// parkedPage shows call id's approval when it has one the viewer may see
// (the approve scope, its own tenant, as the inbox that links here); false
// when it has none, so that the caller answers 404 as for any unknown id.
func (s *Server) parkedPage(w http.ResponseWriter, r *http.Request, v *viewer, id string) bool {
	if !v.Approver || !callIDRe.MatchString(id) || s.cfg.Approvals == nil {
		return false
	}
	a, err := s.cfg.Approvals.GetApproval(r.Context(), v.ID, id)
	switch {
	case errors.Is(err, approvalflow.ErrUnknownApproval):
		return false
	case err != nil:
		// Not "no such call": the read failed (review: a NATS timeout
		// answered 404).
		s.render(w, r, http.StatusBadGateway, "error", v, "Unavailable", "approvals",
			errorData{Status: http.StatusBadGateway, Message: "reading the call's approval failed: " + err.Error()})
		return true
	case !v.MaySee(a.GetCaller().GetTenant(), a.GetCaller().GetAgent()):
		return false
	}
	s.render(w, r, http.StatusOK, "parked", v, "Call "+id, "approvals", parkedData{Approval: rowOfApproval(a)})
	return true
}
