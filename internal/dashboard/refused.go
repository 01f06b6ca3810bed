package dashboard

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/callindex"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

type refusedData struct {
	Entry callindex.Entry
	// Event is the call's REJECTED event as stored (nil: no longer in the
	// events stream, or unreadable: the page shows what the index kept).
	Event *toolwirev1.CallEvent
	// Unread says why Event is nil.
	Unread string
	// Session is the call's session as the reference applier keeps it
	// (nil: the call names none, or it could not be read); SessionHref
	// its page.
	Session     *toolwirev1.Session
	SessionHref string
}

// refusedPage shows a call admission refused: who asked for which tool,
// when, and why it was refused (the policy rule and its reason, or the
// admission step's error), read from its REJECTED event; and its
// session's state and mode, with a link to the session's page (a call
// refused SESSION_INACTIVE or MODE_RESTRICTED shows why there).
func (s *Server) refusedPage(w http.ResponseWriter, r *http.Request, v *viewer, e callindex.Entry) {
	d := refusedData{Entry: e}
	ev, err := s.rejection(r.Context(), e)
	if err != nil {
		d.Unread = err.Error()
	}
	d.Event = ev
	d.Session, d.SessionHref = s.callSession(r, v, e.Tenant, e.Session)
	s.render(w, r, http.StatusOK, "refused", v, "Call "+e.ID, "calls", d)
}

// rejection reads the REJECTED event of refused call e from the events
// stream, by the sequence the index keeps, and checks that it is that
// call's refusal (the index believed it when it indexed it).
func (s *Server) rejection(ctx context.Context, e callindex.Entry) (*toolwirev1.CallEvent, error) {
	if s.cfg.Streams.Events == nil {
		return nil, errors.New("this dashboard does not read the events stream")
	}
	m, err := s.cfg.Streams.Events.GetMsg(ctx, e.Seq)
	if err != nil {
		return nil, errors.New("its refusal is no longer in the events stream (" + err.Error() + ")")
	}
	ev := &toolwirev1.CallEvent{}
	if !strings.HasSuffix(m.Subject, "."+e.ID) || proto.Unmarshal(m.Data, ev) != nil || ev.CallId != e.ID ||
		ev.Type != toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED {
		return nil, errors.New("its refusal is no longer in the events stream")
	}
	return ev, nil
}
