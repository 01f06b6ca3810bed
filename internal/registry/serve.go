package registry

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/signing"
	"github.com/toolwire/toolwire/internal/startstop"
)

// announceTimeout bounds the handling of one announcement.
const announceTimeout = 10 * time.Second

// reply is the wire answer to an Announcement: Announced, or the refusal.
type reply struct {
	Announced
	// Error is a refusal's reason or a failure's message; Code says which
	// ("claimed", "refused", "failed").
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`
	// Holder and Claimant of a "claimed" refusal (ClaimError).
	Holder   *Source `json:"holder,omitempty"`
	Claimant *Source `json:"claimant,omitempty"`
	Tool     string  `json:"tool,omitempty"`
}

// Service serves a Registrar on every pool's bus.PoolRegistrySubject in
// the queue group of the dispatchers: every dispatcher replica runs one
// (internal/dispatch), one of them answers each announcement. The pool is
// the subject's last token, which a pool's role (bus.PoolRole) may only
// publish for its own pools: an announcement whose body names another
// pool is refused. It answers only requests whose replies go to a
// worker's inboxes (a pool role's are under them) or a dispatcher's (a
// message a push consumer was pointed here with carries a $JS.ACK reply
// and is nobody's request). Announcements are handled one at a time per
// replica.
type Service struct {
	startstop.Funcs
	b   *bus.Bus
	r   *Registrar
	log *slog.Logger
}

// NewService returns the announcement service of b (not started).
// trust says which worker signing keys its announcements may enrol, by
// names the dispatcher (NewRegistrar).
func NewService(b *bus.Bus, log *slog.Logger, trust *signing.Trust, by string) *Service {
	log = cmp.Or(log, slog.Default())
	s := &Service{b: b, r: NewRegistrar(b, log, trust, by), log: log.With("component", "registrar")}
	s.StartFunc = s.serve
	return s
}

// Registrar is the service's Registrar, for the dispatcher's in-process
// workers.
func (s *Service) Registrar() *Registrar { return s.r }

func (s *Service) serve(ctx context.Context) error {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	workerInboxes := bus.InboxPrefix(s.b.Config, bus.RoleWorker) + "."
	fromWorker := func(m *nats.Msg) bool {
		if !strings.HasPrefix(m.Reply, workerInboxes) && !strings.HasPrefix(m.Reply, nats.InboxPrefix) {
			s.log.Warn("registry announcement refused: not from a worker", "reply", m.Reply)
			return false
		}
		return true
	}
	sub, err := s.b.NC.QueueSubscribe(bus.PoolRegistrySubject(s.b.Config, "*"), "dispatchers", func(m *nats.Msg) {
		if fromWorker(m) {
			s.respond(m, s.handle(sctx, m))
		}
	})
	if err != nil {
		cancel()
		return fmt.Errorf("registry: serve announcements: %w", err)
	}
	// Workers older than the pools' subjects announce on the bare
	// subject: answered, so that they stop with the reason instead of
	// waiting for an answer for ever (kept for one release).
	old, err := s.b.NC.QueueSubscribe(bus.RegistrySubject(s.b.Config), "dispatchers", func(m *nats.Msg) {
		if fromWorker(m) {
			s.log.Warn("registry announcement refused: a worker older than this dispatcher; upgrade it")
			s.respond(m, reply{Code: "refused", Error: OlderWorker})
		}
	})
	if err != nil {
		cancel()
		_ = sub.Unsubscribe()
		return fmt.Errorf("registry: serve announcements: %w", err)
	}
	unsubscribe, unsubscribeOld := bus.Unsubscriber(sub), bus.Unsubscriber(old)
	s.StopFunc = func() <-chan struct{} {
		done, doneOld := unsubscribe(), unsubscribeOld()
		cancel()
		both := make(chan struct{})
		go func() {
			<-done
			<-doneOld
			close(both)
		}()
		return both
	}
	return nil
}

// OlderWorker is the refusal a worker that announces on the bare
// bus.RegistrySubject gets: a worker of the release before the pools'
// subjects (bus.PoolRegistrySubject), which the dispatchers no longer
// serve there.
const OlderWorker = "refused: this worker is older than the dispatchers (it announces on the registry subject of the release before; " +
	"the dispatchers listen on each pool's subject); upgrade it"

// handle decodes and applies one announcement.
func (s *Service) handle(ctx context.Context, m *nats.Msg) reply {
	var a Announcement
	if err := json.Unmarshal(m.Data, &a); err != nil {
		return reply{Code: "refused", Error: "the announcement does not decode: " + err.Error()}
	}
	// The subject's pool is the one the sender's credential may speak
	// for; the body must not name another.
	if pool := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]; a.Pool != pool {
		s.log.WarnContext(ctx, "registry announcement refused: the body names another pool than its subject", "subject_pool", pool,
			"pool", a.Pool, "worker", a.Worker, "op", a.Op)
		return reply{Code: "refused", Error: fmt.Sprintf("the announcement names pool %q on pool %q's subject", a.Pool, pool)}
	}
	// The announcer must hold the key it names: a worker credential alone
	// (shared by every pool) must not pass for a pool whose key is
	// enrolled.
	if signer, p := signing.VerifySignature(m.Header, signing.KindAnnouncement, "", 0, m.Data); a.Signer != "" && (p != "" || signer != a.Signer) {
		s.log.WarnContext(ctx, "registry announcement refused: not signed by the key it names", "pool", a.Pool, "worker", a.Worker, "problem", p)
		return reply{Code: "refused", Error: "the announcement is not signed by the key it names (" + string(cmp.Or(p, signing.Forged)) + ")"}
	}
	ctx, cancel := context.WithTimeout(ctx, announceTimeout)
	defer cancel()
	got, err := s.r.announce(ctx, a, false)
	var claimed *ClaimError
	var refused *RefusedError
	switch {
	case err == nil:
		s.log.DebugContext(ctx, "registry announcement written", "op", a.Op, "pool", a.Pool, "worker", a.Worker, "version", got.Version)
		return reply{Announced: got}
	case errors.As(err, &claimed):
		s.log.WarnContext(ctx, "registry announcement refused", "op", a.Op, "pool", a.Pool, "worker", a.Worker, "err", err)
		return reply{Code: "claimed", Error: err.Error(), Holder: &claimed.Holder, Claimant: &claimed.Claimant, Tool: claimed.Tool}
	case errors.As(err, &refused):
		s.log.WarnContext(ctx, "registry announcement refused", "op", a.Op, "pool", a.Pool, "worker", a.Worker, "err", err)
		return reply{Code: "refused", Error: refused.Reason, Tool: refused.Tool}
	default:
		s.log.ErrorContext(ctx, "registry announcement failed", "op", a.Op, "pool", a.Pool, "worker", a.Worker, "err", err)
		return reply{Code: "failed", Error: err.Error()}
	}
}

// respond sends r as m's answer.
func (s *Service) respond(m *nats.Msg, r reply) {
	b, err := json.Marshal(r)
	if err == nil {
		err = m.Respond(b)
	}
	if err != nil {
		s.log.Warn("registry announcement: reply not sent", "err", err)
	}
}
