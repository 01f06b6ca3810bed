package maintenance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/startstop"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// orphanBudget bounds the calls one sweep ends, so a flood of them (or a
// retired pool's whole history) is worked off over several sweeps.
const orphanBudget = 1000

// Sweeper ends orphaned calls: calls on a subject that no pool consumer
// filters, which nobody would ever deliver. They arrive by a raw publish
// (an unknown executor type, a tool no pool serves), or stay behind when a
// pool's consumer is deleted; admission itself only queues calls of tools
// a worker registered after creating its consumer. Each sweep lists the
// calls stream's subjects, keeps those no pool consumer's filter matches,
// and ends every call on them older than SweeperConfig.Grace: a dead
// letter and, when the call can be answered safely, a NOT_FOUND answer.
// Every replica sweeps; the dead letter's message id (orphan-<stream
// sequence>) and the result's ExpectLastSequencePerSubject(0) keep that
// harmless.
type Sweeper struct {
	cfg SweeperConfig
	// swept is the last stream sequence handled per orphaned subject (this
	// process's memory: after a restart, answered calls are recognised by
	// their result, unanswerable ones are dead-lettered again). The
	// sweeping goroutine's only.
	swept map[string]uint64
	svc   startstop.Service
}

var _ startstop.Service = (*Sweeper)(nil)

// NewSweeper returns an orphan sweeper with cfg; Start starts it. With
// cfg.Every negative it never sweeps.
func NewSweeper(cfg SweeperConfig) *Sweeper {
	s := &Sweeper{cfg: cfg.WithDefaults(), swept: map[string]uint64{}}
	if s.cfg.Every < 0 {
		s.svc = &startstop.Funcs{} // runs nothing
	} else {
		s.svc = startstop.NewLoop(s.run)
	}
	return s
}

// Start starts the sweeping goroutine; the first sweep comes after half
// to one Every. It returns the configuration's Validate error, if any.
func (s *Sweeper) Start(ctx context.Context) error {
	if err := s.cfg.Validate(); err != nil {
		return err
	}
	return s.svc.Start(ctx)
}

// Stop ends the sweeping goroutine (a sweep under way is cancelled) and
// waits for it.
func (s *Sweeper) Stop(ctx context.Context) error { return s.svc.Stop(ctx) }

func (s *Sweeper) run(ctx context.Context) {
	every := s.cfg.Every
	// Replicas started together do not sweep in step.
	t := time.NewTimer(every/2 + rand.N(every/2+1))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, max(every, 30*time.Second))
		if err := s.sweep(sctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("orphaned calls sweep failed; trying again at the next", "err", err)
		}
		cancel()
		t.Reset(every)
	}
}

// sweep ends the orphaned calls older than the grace period, at most
// orphanBudget of them.
func (s *Sweeper) sweep(ctx context.Context) error {
	b := s.cfg.Bus
	cov, err := ListCoverage(ctx, b)
	if err != nil {
		return err
	}
	info, err := b.Calls.Info(ctx, jetstream.WithSubjectFilter(b.Subjects.AllCalls()))
	if err != nil {
		return fmt.Errorf("list call subjects: %w", err)
	}
	for subject := range s.swept {
		if info.State.Subjects[subject] == 0 {
			delete(s.swept, subject) // aged out
		}
	}
	var orphaned []string
	for subject := range info.State.Subjects {
		if cov.Covers(subject) {
			delete(s.swept, subject)
			continue
		}
		orphaned = append(orphaned, subject)
	}
	slices.Sort(orphaned)
	budget := orphanBudget
	cutoff := time.Now().Add(-s.cfg.Grace)
	for _, subject := range orphaned {
		n, err := s.sweepSubject(ctx, subject, cutoff, budget)
		if n > 0 {
			s.cfg.Logger.Warn("ended calls on a subject no pool consumes", "subject", subject, "calls", n)
		}
		if err != nil {
			return err
		}
		if budget -= n; budget <= 0 {
			return nil
		}
	}
	return nil
}

// sweepSubject ends the calls of subject stored before cutoff that this
// process has not handled yet, at most budget; it returns how many.
func (s *Sweeper) sweepSubject(ctx context.Context, subject string, cutoff time.Time, budget int) (int, error) {
	n := 0
	for n < budget {
		m, err := s.cfg.Bus.Calls.GetMsg(ctx, s.swept[subject]+1, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("read %s: %w", subject, err)
		}
		if m.Time.After(cutoff) {
			return n, nil // not orphaned yet: a pool may still appear
		}
		if err := s.end(ctx, m); err != nil {
			return n, err
		}
		s.swept[subject] = m.Sequence
		n++
	}
	return n, nil
}

// end dead-letters one orphaned call and answers it NOT_FOUND, unless it
// already has a result. A call that cannot be answered safely (not a
// call, a tenant that is no valid name, or a subject naming another
// tenant than the payload: the answer would land in a tenant's results on
// a stranger's word) is dead-lettered raw under no tenant.
func (s *Sweeper) end(ctx context.Context, m *jetstream.RawStreamMsg) error {
	b := s.cfg.Bus
	te := envelope.PreExec(toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND,
		fmt.Sprintf("no worker pool consumes the subject %s: the call was never delivered", m.Subject))
	te.Suggestion = "call tools through the dispatcher; check that a worker pool serves the tool"
	dl := &toolwirev1.DeadLetter{Subject: m.Subject, Reason: "no pool consumes the subject", LastError: te,
		Time: timestamppb.Now(), Worker: "sweeper:" + s.cfg.Name}
	msgID := fmt.Sprintf("orphan-%d", m.Sequence)
	call := &toolwirev1.ToolCall{}
	if proto.Unmarshal(m.Data, call) != nil || call.CallId == "" || !answerable(m.Subject, call) {
		dl.Raw = m.Data
		return deadLetter(ctx, b, dl, msgID)
	}
	tenant := call.Caller.Tenant
	result := b.Subjects.Result(tenant, call.Dispatcher, call.CallId)
	if ok, err := answered(ctx, b, result, call.Tool); err != nil {
		return fmt.Errorf("look up result of %s: %w", call.CallId, err)
	} else if ok {
		return nil // answered already
	}
	dl.Call = call
	if err := deadLetter(ctx, b, dl, msgID); err != nil {
		return err
	}
	if err := answer(ctx, b, result, envelope.DeadLettered(call, te, 0, time.Now())); err != nil {
		return fmt.Errorf("answer orphaned call %s: %w", call.CallId, err)
	}
	return nil
}
