package dashboard

// Pausing and resuming a pool from its card on the pools page: an
// installation admin's action (a pool serves every tenant), through the
// dispatcher (Core.PausePool, Core.ResumePool: internal/dispatch doc.go,
// "Paused pools"), with the action plumbing's Origin check, CSRF token
// and scope check. The pause is the server's, on the pool's consumer, so
// every replica's page shows it, with who paused it, when and why.

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
)

// pausePool pauses the pool named in the path, with the posted reason.
func (s *Server) pausePool(w http.ResponseWriter, r *http.Request, v *viewer) {
	pool := r.PathValue("pool")
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if len(reason) > bus.MaxPauseReasonBytes || !utf8.ValidString(reason) {
		s.refuse(w, r, v, http.StatusBadRequest, "the reason is not UTF-8 text of at most "+strconv.Itoa(bus.MaxPauseReasonBytes)+" bytes")
		return
	}
	_, err := s.cfg.Core.PausePool(r.Context(), v.ID, pool, reason)
	if !s.pauseDone(w, r, v, err) {
		return
	}
	s.log.Info("dashboard pool paused", "who", v.who(), "pool", pool, "reason", reason)
	http.Redirect(w, r, Prefix+"/pools?done="+url.QueryEscape("pool "+pool+" paused: its workers take no calls, new calls are refused until it is resumed"), http.StatusSeeOther)
}

// resumePool resumes the pool named in the path.
func (s *Server) resumePool(w http.ResponseWriter, r *http.Request, v *viewer) {
	pool := r.PathValue("pool")
	if !s.pauseDone(w, r, v, s.cfg.Core.ResumePool(r.Context(), v.ID, pool)) {
		return
	}
	s.log.Info("dashboard pool resumed", "who", v.who(), "pool", pool)
	http.Redirect(w, r, Prefix+"/pools?done="+url.QueryEscape("pool "+pool+" resumed: its queued calls run"), http.StatusSeeOther)
}

// pauseDone answers a failed pause or resume and reports whether err is
// nil.
func (s *Server) pauseDone(w http.ResponseWriter, r *http.Request, v *viewer, err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, dispatch.ErrPauseScope):
		s.refuse(w, r, v, http.StatusForbidden, err.Error())
	case errors.Is(err, dispatch.ErrNoPool):
		s.refuse(w, r, v, http.StatusNotFound, "no such pool")
	case errors.Is(err, dispatch.ErrPauseReason):
		s.refuse(w, r, v, http.StatusBadRequest, err.Error())
	case errors.Is(err, bus.ErrPauseOverlapped):
		s.refuse(w, r, v, http.StatusBadGateway, err.Error())
	default:
		s.refuse(w, r, v, http.StatusBadGateway, "the pool's consumer was not changed: "+err.Error())
	}
	return false
}
