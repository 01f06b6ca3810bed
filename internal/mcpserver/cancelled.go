package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/signing"
)

// A notifications/cancelled a client sends as a POST of its own names the
// request it cancels by the JSON-RPC id the client gave it. The endpoint
// is stateless: the request may be served by another replica, and no
// session scopes the id. Each replica keeps the tools/call requests it is
// serving (inflight), keyed by the caller (tenant and agent, from the
// credential) and the request id; a notification is looked up there, and
// when this replica serves no such request, passed to the others on the
// bus (cancelSubject), each of which looks it up in its own. A request
// found is ended as a closed stream ends it: its call is cancelled, and
// the cancel reaches the worker.
//
// Ids are the client's, and one credential may be used by many clients
// at once, each counting its ids from 1: a replica serving two requests of
// the caller under the id cancels neither (ambiguous), and a notification
// that comes after its request ended, while another client of the same
// credential has a request of that id in flight, cancels that one. Only
// the caller's own requests are ever reached.

// maxInflight bounds the requests a replica keeps for notifications
// (beyond it, a request is served but cannot be cancelled by one).
const maxInflight = 100_000

// maxRequestID bounds the JSON of a request id kept or looked up.
const maxRequestID = 256

// inflight is the tools/call requests one replica serves, by caller and
// request id.
type inflight struct {
	mu   sync.Mutex
	n    int
	reqs map[string][]*inflightReq
}

type inflightReq struct {
	cancel context.CancelCauseFunc
}

// ClientCancelled is the cause a request's context ends with when the
// client cancelled it with notifications/cancelled.
type ClientCancelled struct {
	// Reason is the notification's reason ("" when it gave none).
	Reason string
}

func (e *ClientCancelled) Error() string {
	if e.Reason == "" {
		return "cancelled by the MCP client (notifications/cancelled)"
	}
	return "cancelled by the MCP client (notifications/cancelled): " + e.Reason
}

// inflightKey is the key of request id of caller id.
func inflightKey(id identity.Identity, reqID json.RawMessage) string {
	return id.Tenant + "\x00" + id.Agent + "\x00" + string(bytes.TrimSpace(reqID))
}

// add keeps a request under key; remove forgets it. ok is false when the
// replica keeps maxInflight requests already.
func (f *inflight) add(key string, cancel context.CancelCauseFunc) (remove func(), ok bool) {
	r := &inflightReq{cancel: cancel}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n >= maxInflight {
		return nil, false
	}
	if f.reqs == nil {
		f.reqs = map[string][]*inflightReq{}
	}
	f.reqs[key] = append(f.reqs[key], r)
	f.n++
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		list := f.reqs[key]
		for i, x := range list {
			if x == r {
				list = append(list[:i], list[i+1:]...)
				f.n--
				break
			}
		}
		if len(list) == 0 {
			delete(f.reqs, key)
		} else {
			f.reqs[key] = list
		}
	}, true
}

// cancel ends the one request kept under key with cause; it reports how
// many are kept there (none is cancelled unless exactly one is). A
// request it cancels is forgotten at once, not when its handler returns
// (which first cancels its call): the client may reuse the id for its
// next request meanwhile, and a notification naming that one must not
// find two.
func (f *inflight) cancel(key string, cause error) int {
	f.mu.Lock()
	list := f.reqs[key]
	n := len(list)
	var fn context.CancelCauseFunc
	if n == 1 {
		fn = list[0].cancel
		delete(f.reqs, key)
		f.n--
	}
	f.mu.Unlock()
	if fn != nil {
		fn(cause)
	}
	return n
}

// rpcHead is what the endpoint reads of a POST's body to keep or cancel a
// request: its id, method, and a cancellation's params.
type rpcHead struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason"`
	} `json:"params"`
}

// peek reads the JSON-RPC message a POST carries (one object; a batch or
// anything unreadable is left alone) and puts the body back for whoever
// reads it next. Only tools/call and notifications/cancelled are read:
// the Mcp-Method header, when sent, names the method.
func (s *Server) peek(r *http.Request) (*rpcHead, bool) {
	if r.Method != http.MethodPost {
		return nil, false
	}
	if m := r.Header.Get("Mcp-Method"); m != "" && m != "tools/call" && m != "notifications/cancelled" {
		return nil, false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxRequestBytes+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	if err != nil || int64(len(body)) > s.cfg.MaxRequestBytes || len(bytes.TrimSpace(body)) == 0 || bytes.TrimSpace(body)[0] != '{' {
		return nil, false
	}
	var h rpcHead
	if json.Unmarshal(body, &h) != nil {
		return nil, false
	}
	return &h, true
}

// track makes a tools/call request cancellable by a notifications/cancelled
// naming it (on any replica), and acts on a notifications/cancelled; the
// request goes on either way (the SDK answers a notification 202). done
// forgets the request once it is answered.
func (s *Server) track(r *http.Request) (_ *http.Request, done func()) {
	h, ok := s.peek(r)
	if !ok {
		return r, func() {}
	}
	id, err := callerOf(r.Context())
	if err != nil {
		return r, func() {}
	}
	switch {
	case h.Method == "tools/call" && len(h.ID) > 0 && len(h.ID) <= maxRequestID:
		ctx, cancel := context.WithCancelCause(r.Context())
		remove, ok := s.inflight.add(inflightKey(id, h.ID), cancel)
		if !ok {
			cancel(nil)
			return r, func() {}
		}
		// A request of a revision before 2026-07-28 is cancelled through
		// this context too (callTool).
		ctx = context.WithValue(ctx, httpRequestKey{}, ctx)
		return r.WithContext(ctx), func() { remove(); cancel(nil) }
	case h.Method == "notifications/cancelled" && len(h.ID) == 0 && len(h.Params.RequestID) > 0 && len(h.Params.RequestID) <= maxRequestID:
		s.clientCancelled(id, h.Params.RequestID, h.Params.Reason)
	}
	return r, func() {}
}

// cancelNotice is what a replica passes to the others of a
// notifications/cancelled it serves no request of: the caller (from its
// credential, never from the notification) and the request id.
type cancelNotice struct {
	Tenant    string          `json:"tenant"`
	Agent     string          `json:"agent"`
	RequestID json.RawMessage `json:"request_id"`
	Reason    string          `json:"reason,omitempty"`
}

// maxReason bounds a notification's reason as it is passed on.
const maxReason = 512

// cutReason is reason cut to at most maxReason bytes at a character's
// boundary, and made valid UTF-8 (an invalid byte is replaced): the
// reason ends up in a CANCEL_REQUESTED event, whose protobuf string field
// refuses invalid UTF-8.
func cutReason(reason string) string {
	reason = strings.ToValidUTF8(reason, "\uFFFD")
	if len(reason) <= maxReason {
		return reason
	}
	n := maxReason
	for n > 0 && !utf8.RuneStart(reason[n]) {
		n--
	}
	return reason[:n]
}

// clientCancelled cancels the request of caller id that reqID names: here,
// or, when this replica serves none, on the replica that does.
func (s *Server) clientCancelled(id identity.Identity, reqID json.RawMessage, reason string) {
	reason = cutReason(reason)
	n := s.inflight.cancel(inflightKey(id, reqID), &ClientCancelled{Reason: reason})
	if n > 0 || s.cfg.Bus == nil {
		if n > 1 {
			s.log.Debug("notifications/cancelled names a request id the caller uses more than once here; nothing cancelled", "tenant", id.Tenant)
		}
		return
	}
	b, err := json.Marshal(cancelNotice{Tenant: id.Tenant, Agent: id.Agent, RequestID: reqID, Reason: reason})
	if err == nil {
		err = s.cfg.Bus.NC.PublishMsg(s.cfg.Bus.Signer.SignedMsg(cancelSubject(s.cfg.Bus.Subjects.Prefix), signing.KindMCPCancel, "", 0, b, nil))
	}
	if err != nil {
		s.log.Warn("a notifications/cancelled could not be passed to the other replicas", "err", err)
	}
}

// cancelSubject is where replicas pass notifications/cancelled on. Only
// dispatchers may publish there, but an operator may make a push consumer
// on CALLS (a scan slot) whose deliver subject is this one, delivering
// messages it stored on shadow subjects: the server delivers them with a
// $JS.ACK reply, while a replica publishes its notices with none, so a
// message with a reply is dropped (as the other dispatcher services drop
// deliveries: internal/dlq/serve.go, internal/hooks/service.go). A notice
// is also signed by the dispatcher's key (Bus.Signer, KindMCPCancel), and
// taken only when the signer is enrolled as a dispatcher's.
func cancelSubject(prefix string) string { return prefix + ".mcp.cancelled" }

// listenCancels takes the other replicas' notices (clientCancelled) until
// stop is called.
func (s *Server) listenCancels() (stop func(), err error) {
	if s.cfg.Bus == nil {
		return func() {}, nil
	}
	sub, err := s.cfg.Bus.NC.Subscribe(cancelSubject(s.cfg.Bus.Subjects.Prefix), func(m *nats.Msg) {
		if m.Reply != "" {
			s.log.Warn("notifications/cancelled notice refused: it carries a reply (a stream's delivery, not a replica's)", "reply", m.Reply)
			return
		}
		var n cancelNotice
		if len(m.Data) > 2*maxRequestID+maxReason+1024 || json.Unmarshal(m.Data, &n) != nil ||
			len(n.RequestID) == 0 || len(n.RequestID) > maxRequestID || !identity.TenantRe.MatchString(n.Tenant) {
			return
		}
		if err := s.dispatcherSigned(m); err != nil {
			s.log.Warn("notifications/cancelled notice refused: not signed by a dispatcher", "err", err)
			return
		}
		if s.inflight.cancel(inflightKey(identity.Identity{Tenant: n.Tenant, Agent: n.Agent}, n.RequestID),
			&ClientCancelled{Reason: cutReason(n.Reason)}) > 1 {
			s.log.Debug("notifications/cancelled names a request id the caller uses more than once here; nothing cancelled", "tenant", n.Tenant)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("mcpserver: subscribe to notifications/cancelled: %w", err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// checkSignerTimeout bounds the registry lookup of a notice's signer.
const checkSignerTimeout = 5 * time.Second

// dispatcherSigned checks that m is signed by a dispatcher's key.
func (s *Server) dispatcherSigned(m *nats.Msg) error {
	ctx, cancel := context.WithTimeout(context.Background(), checkSignerTimeout)
	defer cancel()
	v, err := s.cfg.Bus.Keys.Check(ctx, m.Header, signing.KindMCPCancel, "", 0, m.Data, "")
	if err == nil && !v.Dispatcher {
		err = errors.New("not a dispatcher's key")
	}
	return err
}

// cancelReason is the reason a call is cancelled with when its request's
// context ended: the client's notification, or its going away.
func cancelReason(ctx context.Context) string {
	var cc *ClientCancelled
	if rc, ok := ctx.Value(httpRequestKey{}).(context.Context); ok && errors.As(context.Cause(rc), &cc) {
		return cc.Error()
	}
	if errors.As(context.Cause(ctx), &cc) {
		return cc.Error()
	}
	return "the MCP client went away"
}
