package registry

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/signing"
)

// Waits of Remote between attempts while no dispatcher answers.
const (
	remoteRetryFirst = 100 * time.Millisecond
	remoteRetryMax   = 5 * time.Second
	// DefaultNoAnswerHint is how long Remote goes unanswered before it
	// logs that the dispatchers may be older than the worker (HintAfter).
	DefaultNoAnswerHint = 30 * time.Second
)

// Remote is the Writer of a worker process: it sends each Announcement to
// the dispatchers on its pool's subject (bus.PoolRegistrySubject) and
// waits for their answer. While
// no dispatcher answers (no responders, a request that timed out:
// bus.Unavailable), it asks again with backoff, logging each retry at
// WARN, until ctx ends: a worker that starts before its dispatchers waits
// for them, as it waits for its NATS cluster. Unanswered for longer than
// HintAfter, it logs once at ERROR that the dispatchers may be older
// than the worker: those of the release before serve the bare
// bus.RegistrySubject only, never a pool's subject (upgrade the
// dispatchers first, then the pools).
type Remote struct {
	nc        *nats.Conn
	cfg       bus.Config
	log       *slog.Logger
	signer    *signing.Key
	hintAfter time.Duration
}

// HintAfter sets how long r goes unanswered before it logs that the
// dispatchers may be older than the worker (default
// DefaultNoAnswerHint). It returns r.
func (r *Remote) HintAfter(d time.Duration) *Remote {
	r.hintAfter = d
	return r
}

// SignWith makes r sign each announcement with k, the key it names
// (Announcement.Signer): the proof that the announcer holds the key the
// dispatchers enrol or find enrolled. It returns r.
func (r *Remote) SignWith(k *signing.Key) *Remote {
	r.signer = k
	return r
}

// NewRemote returns the Remote of the installation cfg over nc.
func NewRemote(nc *nats.Conn, cfg bus.Config, log *slog.Logger) *Remote {
	return &Remote{nc: nc, cfg: cfg, log: cmp.Or(log, slog.Default()), hintAfter: DefaultNoAnswerHint}
}

// Announce asks the dispatchers to write a; see Writer.
func (r *Remote) Announce(ctx context.Context, a Announcement) (Announced, error) {
	data, err := json.Marshal(a)
	if err != nil {
		return Announced{}, fmt.Errorf("registry: announce: %w", err)
	}
	wait := remoteRetryFirst
	start, hinted := time.Now(), false
	for attempt := 1; ; attempt++ {
		m, err := r.request(ctx, a.Pool, data)
		if err == nil {
			return decodeReply(m.Data)
		}
		if !bus.Unavailable(err) || ctx.Err() != nil {
			return Announced{}, fmt.Errorf("registry: announce to the dispatchers: %w", err)
		}
		d := wait/2 + rand.N(wait/2+1) // jitter: replicas started together do not retry in step
		r.log.WarnContext(ctx, "no dispatcher answers the registry announcement; retrying", "op", a.Op, "pool", a.Pool,
			"attempt", attempt, "retry_in", d.Round(time.Millisecond), "err", err)
		if waited := time.Since(start); !hinted && waited >= r.hintAfter {
			hinted = true
			r.log.ErrorContext(ctx, "no dispatcher has answered on the pool's registry subject: are the dispatchers running, and upgraded? "+
				"Dispatchers older than this worker do not serve the pools' subjects; upgrade the dispatchers first, then the pools",
				"subject", bus.PoolRegistrySubject(r.cfg, a.Pool), "waited", waited.Round(time.Second))
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return Announced{}, fmt.Errorf("registry: announce to the dispatchers: %w", errors.Join(err, ctx.Err()))
		case <-t.C:
		}
		wait = min(2*wait, remoteRetryMax)
	}
}

// request sends one announcement of pool, waiting at most announceTimeout plus a
// little for the answer.
func (r *Remote) request(ctx context.Context, pool string, data []byte) (*nats.Msg, error) {
	rctx, cancel := context.WithTimeout(ctx, announceTimeout+2*time.Second)
	defer cancel()
	msg := &nats.Msg{Subject: bus.PoolRegistrySubject(r.cfg, pool), Data: data}
	if r.signer != nil {
		msg.Header = r.signer.Sign(nil, signing.KindAnnouncement, "", 0, data)
	}
	return r.nc.RequestMsgWithContext(rctx, msg)
}

// decodeReply turns a dispatcher's answer into Announced or the error it
// names.
func decodeReply(data []byte) (Announced, error) {
	var rp reply
	if err := json.Unmarshal(data, &rp); err != nil {
		return Announced{}, fmt.Errorf("registry: undecodable answer from a dispatcher: %w", err)
	}
	switch rp.Code {
	case "":
		return rp.Announced, nil
	case "claimed":
		if rp.Holder != nil && rp.Claimant != nil {
			return Announced{}, &ClaimError{Tool: rp.Tool, Holder: *rp.Holder, Claimant: *rp.Claimant}
		}
	case "refused":
		return Announced{}, &RefusedError{Tool: rp.Tool, Reason: rp.Error}
	}
	return Announced{}, fmt.Errorf("registry: the dispatcher could not write the announcement: %s", rp.Error)
}
