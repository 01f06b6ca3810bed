package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"

	"google.golang.org/protobuf/proto"

	"connectrpc.com/connect"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/intents"
	"github.com/toolwire/toolwire/internal/profiles"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1/toolwirev1connect"
)

// Service is the Connect implementation of toolwire.v1.DispatcherService
// over a dispatcher (Core). Identity comes from the request context
// (identity.Authenticate); a request without one is refused.
type Service struct {
	d         Core
	approvals Approvals
	policies  Policies
	usage     Usage
	// compressMin is Config.CompressMinBytes.
	compressMin int
	// profiles is Config.Profiles.
	profiles *profiles.Set
}

var _ toolwirev1connect.DispatcherServiceHandler = (*Service)(nil)

// NewService returns the service configured by cfg (WithDefaults, then
// Validate: an invalid cfg is refused, naming the field).
func NewService(cfg Config) (*Service, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Service{d: cfg.Core, approvals: cfg.Approvals, policies: cfg.Policies, usage: cfg.Usage, compressMin: cfg.CompressMinBytes,
		profiles: cfg.Profiles}, nil
}

// Handler returns the path and HTTP handler of the service with identity
// established by auth for every request, and every request bounded by the
// dispatcher's request limits (dispatch.Config.MaxRequestBytes,
// MaxArgsValues, MaxRequestDepth) before it is decoded.
func (s *Service) Handler(auth identity.Authenticator, opts ...connect.HandlerOption) (string, http.Handler) {
	cfg := s.d.Config()
	base := append([]connect.HandlerOption{connect.WithCompressMinBytes(s.compressMin)},
		requestLimits{values: cfg.MaxArgsValues + requestFields, depth: cfg.MaxRequestDepth}.handlerOptions(cfg.MaxRequestBytes)...)
	path, h := toolwirev1connect.NewDispatcherServiceHandler(s, append(base, opts...)...)
	return path, explainContentType(LimitBody(identity.Authenticate(auth, h), cfg.MaxRequestBytes))
}

func identityOf(ctx context.Context) (identity.Identity, error) {
	id, ok := identity.From(ctx)
	if !ok {
		return identity.Identity{}, connect.NewError(connect.CodeUnauthenticated, identity.ErrUnauthenticated)
	}
	return id, nil
}

func toConnectErr(err error) error {
	switch {
	case errors.Is(err, dispatch.ErrStopped):
		return connect.NewError(connect.CodeUnavailable, err)
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	case errors.Is(err, dispatch.ErrNotAdmin), errors.Is(err, dispatch.ErrSessionsHidden):
		return connect.NewError(connect.CodePermissionDenied, err)
	case errors.Is(err, dispatch.ErrUnknownMode):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, dispatch.ErrNoSession), errors.Is(err, dispatch.ErrBadSession), errors.Is(err, dispatch.ErrBadModel), errors.Is(err, dispatch.ErrBadEndReason), errors.Is(err, intents.ErrBadPageToken):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, dispatch.ErrNotFinished):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, intents.ErrContention):
		return connect.NewError(connect.CodeAborted, err)
	case errors.Is(err, intents.ErrSessionFull), errors.Is(err, dispatch.ErrTooManyWatches), errors.Is(err, dispatch.ErrTooManyWaiting):
		return connect.NewError(connect.CodeResourceExhausted, err)
	case errors.Is(err, dispatch.ErrUnknownCall), errors.Is(err, dispatch.ErrCallNotStored):
		return connect.NewError(connect.CodeNotFound, err)
	}
	return connect.NewError(connect.CodeInternal, err)
}

// Call submits and waits.
func (s *Service) Call(ctx context.Context, req *connect.Request[toolwirev1.CallRequest]) (*connect.Response[toolwirev1.CallResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	prof, err := s.profile(req.Header())
	if err != nil {
		return nil, err
	}
	resp, err := s.d.Call(ctx, id, req.Msg, req.Msg.Wait.AsDuration())
	if err != nil {
		return nil, toConnectErr(err)
	}
	if prof != nil {
		resp = proto.CloneOf(resp)
		resp.Response = prof.Response(resp.Response)
	}
	return connect.NewResponse(resp), nil
}

// Submit submits without waiting.
func (s *Service) Submit(ctx context.Context, req *connect.Request[toolwirev1.SubmitRequest]) (*connect.Response[toolwirev1.SubmitResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	prof, err := s.profile(req.Header())
	if err != nil {
		return nil, err
	}
	sub, err := s.d.Submit(ctx, id, CallOf(req.Msg))
	if err != nil {
		return nil, toConnectErr(err)
	}
	out := &toolwirev1.SubmitResponse{CallId: sub.CallID, Duplicate: sub.Duplicate, State: toolwirev1.CallState_CALL_STATE_PENDING, Unconfirmed: sub.Unconfirmed}
	switch {
	case sub.Awaiting != nil:
		out.State, out.Response = toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, sub.Awaiting
	case sub.Rejected != nil || sub.Finished != nil:
		out.State, out.Response = toolwirev1.CallState_CALL_STATE_DONE, cmp.Or(sub.Rejected, sub.Finished)
	}
	out.Response = prof.Response(out.Response) // a copy; nil prof: as it is
	return connect.NewResponse(out), nil
}

// GetResult returns a result by call id.
func (s *Service) GetResult(ctx context.Context, req *connect.Request[toolwirev1.GetResultRequest]) (*connect.Response[toolwirev1.GetResultResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	prof, err := s.profile(req.Header())
	if err != nil {
		return nil, err
	}
	resp, err := s.d.GetResult(ctx, id, req.Msg.CallId, req.Msg.Wait.AsDuration())
	if err != nil {
		return nil, toConnectErr(err)
	}
	if resp.GetState() == toolwirev1.CallState_CALL_STATE_UNKNOWN {
		return nil, unknownCall(req.Msg.CallId)
	}
	if prof != nil {
		resp = proto.CloneOf(resp)
		resp.Response = prof.Response(resp.Response)
	}
	return connect.NewResponse(resp), nil
}

// unknownCall is the answer about a call id outside the caller's reach:
// NOT_FOUND, the same for an id nobody minted, another tenant's call and
// a call whose records are gone (dispatch's admitted), on every RPC.
func unknownCall(callID string) error {
	return connect.NewError(connect.CodeNotFound, fmt.Errorf("%w %q", dispatch.ErrUnknownCall, callID))
}

// Watch streams a call's events until it finishes.
func (s *Service) Watch(ctx context.Context, req *connect.Request[toolwirev1.WatchRequest], stream *connect.ServerStream[toolwirev1.WatchResponse]) error {
	id, err := identityOf(ctx)
	if err != nil {
		return err
	}
	if err := noProfile(req.Header(), "Watch"); err != nil {
		return err
	}
	err = s.d.Watch(ctx, id, req.Msg.CallId, func(ev *toolwirev1.CallEvent) error {
		return stream.Send(&toolwirev1.WatchResponse{Event: ev})
	})
	if errors.Is(err, dispatch.ErrUnknownCall) {
		return unknownCall(req.Msg.CallId)
	}
	if err != nil {
		return toConnectErr(err)
	}
	return nil
}

// Cancel asks for a call to stop.
func (s *Service) Cancel(ctx context.Context, req *connect.Request[toolwirev1.CancelRequest]) (*connect.Response[toolwirev1.CancelResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	out, err := s.d.Cancel(ctx, id, req.Msg.CallId, req.Msg.Reason)
	if err != nil {
		return nil, toConnectErr(err)
	}
	return connect.NewResponse(&toolwirev1.CancelResponse{Outcome: out}), nil
}

// ListTools lists the tools the caller's scopes allow; executor
// configuration only to the admin scope. With a session, the tools its
// mode forbids outright are left out; with a model, its family's toolset
// applies; each tool is shown as its spec's definition for the family and
// the mode has it; in the native list and the export alike (dispatch's
// VisibleToolsFor).
func (s *Service) ListTools(ctx context.Context, req *connect.Request[toolwirev1.ListToolsRequest]) (*connect.Response[toolwirev1.ListToolsResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := noProfile(req.Header(), "ListTools"); err != nil {
		return nil, err
	}
	tools, err := s.d.VisibleToolsFor(ctx, id, registry.Filter{NameGlob: req.Msg.NameGlob, Executor: req.Msg.Executor, Category: req.Msg.Category},
		dispatch.ListFor{Session: req.Msg.Session, Model: req.Msg.Model})
	if err != nil {
		return nil, toConnectErr(err)
	}
	out := &toolwirev1.ListToolsResponse{Tools: tools}
	if f := req.Msg.Format; f != toolwirev1.ToolFormat_TOOL_FORMAT_UNSPECIFIED && f != toolwirev1.ToolFormat_TOOL_FORMAT_NATIVE {
		b, err := registry.Export(f, out.Tools)
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, err)
		}
		out.ToolsJson = string(b)
	}
	return connect.NewResponse(out), nil
}

// GetTool returns one tool's spec; executor configuration only to the
// admin scope. With a model, the tool as ListTools shows it to that
// model (in the policy's default mode): not found when its family's
// toolset or the spec's definition hides or substitutes it, with the
// definition's description and schema and the toolset's variant schema
// when they offer one (dispatch's VisibleToolFor); without a model, the
// registered spec.
func (s *Service) GetTool(ctx context.Context, req *connect.Request[toolwirev1.GetToolRequest]) (*connect.Response[toolwirev1.GetToolResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := noProfile(req.Header(), "GetTool"); err != nil {
		return nil, err
	}
	spec, err := s.d.VisibleToolFor(ctx, id, req.Msg.Name, dispatch.GetFor{Version: req.Msg.Version, Model: req.Msg.Model})
	if errors.Is(err, dispatch.ErrBadModel) {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeNotFound, registry.ErrNotFound)
	}
	out := &toolwirev1.GetToolResponse{Tool: spec}
	if f := req.Msg.Format; f != toolwirev1.ToolFormat_TOOL_FORMAT_UNSPECIFIED && f != toolwirev1.ToolFormat_TOOL_FORMAT_NATIVE {
		b, err := registry.ExportOne(f, spec)
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, err)
		}
		out.ToolJson = string(b)
	}
	return connect.NewResponse(out), nil
}

// CallOf returns the CallRequest with the fields of a SubmitRequest: the
// two messages share field numbers 1-12 by design (a test keeps them in
// step), so the wire form converts.
func CallOf(s *toolwirev1.SubmitRequest) *toolwirev1.CallRequest {
	out := &toolwirev1.CallRequest{}
	if b, err := proto.Marshal(s); err == nil {
		_ = proto.Unmarshal(b, out)
	}
	return out
}

// ApproveTool records the definition hash an operator approves for a tool
// that was disabled because its definition changed. The worker serving
// the tool sees the approval and re-enables it; the response carries the
// spec as it stands at the time of the request.
func (s *Service) ApproveTool(ctx context.Context, req *connect.Request[toolwirev1.ApproveToolRequest]) (*connect.Response[toolwirev1.ApproveToolResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	spec, err := s.d.ApproveTool(ctx, id, req.Msg.Name, req.Msg.DefinitionHash)
	switch {
	case errors.Is(err, dispatch.ErrNeedAdminScope):
		return nil, connect.NewError(connect.CodePermissionDenied, err)
	case errors.Is(err, registry.ErrNotFound):
		return nil, connect.NewError(connect.CodeNotFound, registry.ErrNotFound)
	case errors.Is(err, dispatch.ErrNoDefinition), errors.Is(err, dispatch.ErrDefinitionChanged):
		return nil, connect.NewError(connect.CodeFailedPrecondition, err)
	case err != nil:
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	return connect.NewResponse(&toolwirev1.ApproveToolResponse{Tool: spec}), nil
}

// GetSession returns the state the reference applier keeps for a session
// of the caller's tenant.
func (s *Service) GetSession(ctx context.Context, req *connect.Request[toolwirev1.GetSessionRequest]) (*connect.Response[toolwirev1.GetSessionResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	sess, err := s.d.GetSession(ctx, id, req.Msg.Session)
	if err != nil {
		return nil, toConnectErr(err)
	}
	return connect.NewResponse(&toolwirev1.GetSessionResponse{Session: sess}), nil
}

// SetSessionMode sets a session's mode (a SET_MODE intent; admin scope).
func (s *Service) SetSessionMode(ctx context.Context, req *connect.Request[toolwirev1.SetSessionModeRequest]) (*connect.Response[toolwirev1.SetSessionModeResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	sess, err := s.d.SetSessionMode(ctx, id, req.Msg.Session, req.Msg.Mode)
	if err != nil {
		return nil, toConnectErr(err)
	}
	return connect.NewResponse(&toolwirev1.SetSessionModeResponse{Session: sess}), nil
}

// ListSessions lists a page of the caller's tenant's sessions.
func (s *Service) ListSessions(ctx context.Context, req *connect.Request[toolwirev1.ListSessionsRequest]) (*connect.Response[toolwirev1.ListSessionsResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	page, err := s.d.ListSessions(ctx, id, intents.ListQuery{State: m.GetState(), Mode: m.GetMode(), PageSize: int(m.GetPageSize()), PageToken: m.GetPageToken()})
	if err != nil {
		return nil, toConnectErr(err)
	}
	return connect.NewResponse(&toolwirev1.ListSessionsResponse{Sessions: page.Sessions, NextPageToken: page.Next}), nil
}

// EndSession ends a session (an END_SESSION intent; admin scope).
func (s *Service) EndSession(ctx context.Context, req *connect.Request[toolwirev1.EndSessionRequest]) (*connect.Response[toolwirev1.EndSessionResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	sess, err := s.d.EndSession(ctx, id, req.Msg.GetSession(), req.Msg.GetReason())
	if err != nil {
		return nil, toConnectErr(err)
	}
	return connect.NewResponse(&toolwirev1.EndSessionResponse{Session: sess}), nil
}

// ApplyIntents applies a finished call's intents to its session.
func (s *Service) ApplyIntents(ctx context.Context, req *connect.Request[toolwirev1.ApplyIntentsRequest]) (*connect.Response[toolwirev1.ApplyIntentsResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := s.d.ApplyIntents(ctx, id, req.Msg.CallId)
	if err != nil {
		return nil, toConnectErr(err)
	}
	return connect.NewResponse(resp), nil
}

// ClearSessionPins clears a session's pinned spec versions (all, or one
// tool's; admin scope).
func (s *Service) ClearSessionPins(ctx context.Context, req *connect.Request[toolwirev1.ClearSessionPinsRequest]) (*connect.Response[toolwirev1.ClearSessionPinsResponse], error) {
	id, err := identityOf(ctx)
	if err != nil {
		return nil, err
	}
	sess, err := s.d.ClearSessionPins(ctx, id, req.Msg.Session, req.Msg.Tool)
	if err != nil {
		return nil, toConnectErr(err)
	}
	return connect.NewResponse(&toolwirev1.ClearSessionPinsResponse{Session: sess}), nil
}
