package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolwire/toolwire/internal/startstop"
)

// WatchdogConfig tunes a Watchdog. The zero value is the defaults.
//
// The defaults move a connection off a server that stopped answering in
// well under a second when another server answers at once (the next probe
// starts within Period; Suspect later the other servers are probed; one
// that answers its whole probe while the connection's server is still
// silent, three times as long as that answer took, wins at once), and in
// about 2 s otherwise (two probes time out). Neither moves on a loaded
// 2-core machine by mistake: load slows every server alike, and a
// connection moves only to a server that answered the same probe
// meanwhile on a connection of its own, which costs it a dial and two
// round trips more. The cost: a PING and a JetStream API request (a
// stream info, which the stream's leader answers from memory) every
// Period per process — 100 requests a second to the calls stream's leader
// for 50 workers at the default 500 ms; dispatchers probe every 250 ms.
type WatchdogConfig struct {
	// Period is the time from the start of one probe of the connection's
	// server to the start of the next. Default 500ms.
	Period time.Duration
	// Timeout bounds a probe: the PONG to a PING, then the answer of the
	// JetStream API; and, for another server, connecting to it, then the
	// same. Default 1s.
	Timeout time.Duration
	// Suspect is how long the connection's server may stay quiet in a
	// probe (its JetStream request unanswered after the PONG, or no PONG
	// and nothing else received) before it is asked again and the other
	// servers are probed alongside. When one of them answers its whole
	// probe while the connection's server leaves the new request
	// unanswered three times as long (and at least Suspect), the
	// connection moves at once. Default 200ms.
	Suspect time.Duration
	// Failures is how many probes in a row must fail before the
	// connection moves. Default 2.
	Failures int
	// MoveBurst is how many moves may follow one another without waiting;
	// after them, one more is allowed every MoveRefill, so that probes
	// failing for a reason no server can escape (a machine so loaded that
	// every server answers late) make no storm of moves. Default 3.
	MoveBurst int
	// MoveRefill is how long one move's allowance takes to come back.
	// Default 30s.
	MoveRefill time.Duration
	// Stream names the stream whose info the JetStream probe asks for:
	// answered by the stream's leader, so a server cut from the leader
	// fails it. Dispatchers and workers give the calls stream (their
	// credentials may read its info). Empty: account info ($JS.API.INFO),
	// answered by the meta group's leader.
	Stream string
}

// AdmissionWatchdog is the WatchdogConfig of a dispatcher, which admits
// calls onto stream (the calls stream): probed every 250 ms, so that
// admission leaves a server that went quiet within about 0.7 s when
// another server answers — there are few dispatchers, so the probes cost
// little.
func AdmissionWatchdog(stream string) WatchdogConfig {
	return WatchdogConfig{Stream: stream, Period: 250 * time.Millisecond}
}

// WithDefaults returns c with every zero field set to its default.
func (c WatchdogConfig) WithDefaults() WatchdogConfig {
	c.Period = cmp.Or(c.Period, 500*time.Millisecond)
	c.Timeout = cmp.Or(c.Timeout, time.Second)
	c.Suspect = cmp.Or(c.Suspect, 200*time.Millisecond)
	c.Failures = cmp.Or(c.Failures, 2)
	c.MoveBurst = cmp.Or(c.MoveBurst, 3)
	c.MoveRefill = cmp.Or(c.MoveRefill, 30*time.Second)
	return c
}

// Validate reports the first field that is out of range.
func (c WatchdogConfig) Validate() error {
	switch {
	case c.Period <= 0:
		return fmt.Errorf("bus: watchdog Period %s: must be positive", c.Period)
	case c.Timeout <= 0:
		return fmt.Errorf("bus: watchdog Timeout %s: must be positive", c.Timeout)
	case c.Suspect <= 0:
		return fmt.Errorf("bus: watchdog Suspect %s: must be positive", c.Suspect)
	case c.Failures < 1:
		return fmt.Errorf("bus: watchdog Failures %d: must be at least 1", c.Failures)
	case c.MoveBurst < 1:
		return fmt.Errorf("bus: watchdog MoveBurst %d: must be at least 1", c.MoveBurst)
	case c.MoveRefill <= 0:
		return fmt.Errorf("bus: watchdog MoveRefill %s: must be positive", c.MoveRefill)
	}
	return nil
}

// Watchdog moves a connection made by Dial off a server that cannot serve
// it while another server of the cluster can: a server that went silent
// (no PONG: a frozen process, a cut link — found in about 2 s rather than
// the PINGs' 6 to 9 s) or whose JetStream API fails (no responders, a 503
// such as "JetStream system temporarily unavailable", a timeout, a stream
// without a leader: a server cut from its cluster but not from its
// clients, which answers PINGs for ever).
//
// It probes the connection's server every Period: a PING, then a
// JetStream API request (WatchdogConfig.Stream), within Timeout. Along
// with the probe that would be the Failures-th failure in a row it probes
// every other server of the connection's pool (its URLs and the servers
// the cluster announced) on a short-lived connection of its own, with the
// same credentials, dialer and inbox prefix (doc.go); if that probe fails
// too, it moves the connection (nats.Conn.ForceReconnect, steered by the
// ConnMonitor) to the first whose JetStream answered — or, when the
// connection's server did not even answer the PING, to the first that
// did. The others are probed too once the server has stayed quiet for
// Suspect (the JetStream request unanswered after the PONG, or no PONG and
// nothing else received), and the connection moves at once when one of
// them answers its whole probe while the server stays quiet three times
// as long (probe). A server is never chosen when its id is the one being
// left.
// When none qualifies the connection stays (logged once per episode): a
// cluster that is electing a leader fails every probe, and moving would
// not help. Moves are rate-limited (MoveBurst, then one per MoveRefill);
// each is logged and counted (ConnMonitor.Moves).
//
// With a single server in the pool (one URL and no other server
// announced) there is nothing to move to and the Watchdog does nothing
// but look at the pool every Period. It is a startstop.Service.
type Watchdog struct {
	nc   *nats.Conn
	conn ConnConfig
	mon  *ConnMonitor
	log  *slog.Logger
	cfg  WatchdogConfig
	loop *startstop.Loop

	reports chan struct{}
	wg      sync.WaitGroup // probes still running

	// The loop's state.
	probing  *pendingProbe // the probe of the connection in flight (it may outlive its timeout)
	servers  []string      // the connection's pool, as of the last probe (or the start)
	othersAt time.Time     // when the other servers were last probed
	// recentOthers is that probe (nil if none was started then).
	recentOthers *othersProbe
	fails        int       // failed probes in a row
	reconnects   uint64    // the monitor's count at the last probe
	stuck        bool      // "staying" was logged for this episode
	moves        float64   // moves allowed now (a token bucket of MoveBurst)
	counted      time.Time // when moves was last brought up to date
}

// NewWatchdog returns a Watchdog for nc, which Dial made with conn (whose
// Monitor must be set: it steers the moves and counts them).
func NewWatchdog(nc *nats.Conn, conn ConnConfig, cfg WatchdogConfig) (*Watchdog, error) {
	if conn.Monitor == nil {
		return nil, errors.New("bus: a watchdog needs the ConnConfig.Monitor its connection was dialled with")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Watchdog{nc: nc, conn: conn, mon: conn.Monitor, log: conn.Monitor.log, cfg: cfg, reports: make(chan struct{}, 1),
		servers: nc.Servers(), moves: float64(cfg.MoveBurst), counted: time.Now()}
	w.loop = startstop.NewLoop(w.run)
	return w, nil
}

// Start starts probing.
func (w *Watchdog) Start(ctx context.Context) error { return w.loop.Start(ctx) }

// Stop stops probing and waits for the probes in flight (at most Timeout,
// or the connection's flusher timeout when a probe waits for its lock).
func (w *Watchdog) Stop(ctx context.Context) error { return w.loop.Stop(ctx) }

// Report tells the watchdog that a request or publish on the connection
// failed in a way its server may be to blame for (a timeout, no
// responders, a 503): the next probe starts now rather than at its
// period, so that a busy process leaves a sick server sooner. It never
// blocks; reports are coalesced, and probes still start at least a
// quarter of Period apart.
func (w *Watchdog) Report(err error) {
	if err == nil {
		return
	}
	select {
	case w.reports <- struct{}{}:
	default:
	}
}

func (w *Watchdog) run(ctx context.Context) {
	defer w.wg.Wait()
	timer := time.NewTimer(w.cfg.Period)
	defer timer.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-w.reports:
			if d := time.Until(last.Add(w.cfg.Period / 4)); d > 0 {
				timer.Reset(d)
				continue
			}
		}
		last = time.Now()
		others := w.startOthers(ctx, false)
		r, faster := w.probe(ctx, &others)
		if ctx.Err() != nil {
			return
		}
		if faster != nil {
			w.moveFaster(r, *faster)
		} else {
			w.step(r, others)
		}
		timer.Reset(max(0, time.Until(last.Add(w.cfg.Period))))
	}
}

// step judges one probe of the connection's server, and moves the
// connection when its server has failed enough probes in a row, to a
// server others (probed meanwhile) found healthier.
func (w *Watchdog) step(r probeResult, others *othersProbe) {
	if n := w.mon.Reconnects(); n != w.reconnects { // on another connection since
		w.reconnects, w.fails, w.stuck = n, 0, false
	}
	if r.err != nil && r.reconnects != w.reconnects {
		return // a probe of the server the connection has left
	}
	if r.servers != nil {
		w.servers = r.servers
	}
	if r.err == nil {
		if w.stuck {
			w.log.Info("NATS server healthy again", "server", w.mon.current().url)
		}
		w.fails, w.stuck = 0, false
		return
	}
	w.fails++
	w.log.Debug("NATS server probe failed", "server", w.mon.current().url, "reason", r.reason, "failures", w.fails, "err", r.err)
	if w.fails < w.cfg.Failures {
		return
	}
	from := w.mon.current()
	if !w.mayMove(time.Now()) {
		if !w.stuck {
			w.log.Warn("NATS server unhealthy, but the connection moved too often lately; staying for now",
				"server", from.url, "server_name", from.name, "reason", r.reason, "failures", w.fails, "err", r.err,
				"moves_allowed", w.cfg.MoveBurst, "per", w.cfg.MoveRefill*time.Duration(w.cfg.MoveBurst))
			w.stuck = true
		}
		return
	}
	to, ok := others.choose(r.reason)
	if !ok {
		if !w.stuck {
			w.log.Warn("NATS server unhealthy, but no other server of the cluster is healthier; staying",
				"server", from.url, "server_name", from.name, "reason", r.reason, "failures", w.fails, "err", r.err)
			w.stuck = true
		}
		return
	}
	w.move(from, to, r)
}

// moveFaster moves the connection to a server that answered its probe
// while the connection's server stayed silent (probe): unless the
// connection moved meanwhile or is down, or the rate limit forbids it.
func (w *Watchdog) moveFaster(r probeResult, to candidate) {
	if r.reconnects != w.mon.Reconnects() || w.mon.down() || !w.mayMove(time.Now()) {
		w.step(r, nil)
		return
	}
	w.reconnects = r.reconnects
	w.move(w.mon.current(), to, r)
}

// bytesRead is how many bytes the connection has read. A connection Dial
// did not make has no count: a new value each time, so that a server
// that answers no PING never seems quiet, and the timeouts judge it.
func (w *Watchdog) bytesRead() uint64 {
	if w.mon.socket == nil {
		return uint64(time.Now().UnixNano())
	}
	return w.mon.socket.bytesRead()
}

// mayMove says whether the rate limit allows a move now.
func (w *Watchdog) mayMove(now time.Time) bool {
	refilled := float64(now.Sub(w.counted)) / float64(w.cfg.MoveRefill)
	w.moves, w.counted = min(float64(w.cfg.MoveBurst), w.moves+refilled), now
	return w.moves >= 1
}

// move steers the connection to the server to and makes it reconnect.
func (w *Watchdog) move(from serverRef, to candidate, r probeResult) {
	w.moves--
	w.fails, w.stuck = 0, false
	w.mon.moves.Add(1)
	w.log.Warn("moving the NATS connection off an unhealthy server", "server", from.url, "server_name", from.name,
		"reason", r.reason, "err", r.err, "to", redactURL(to.url), "to_name", to.name, "to_jetstream_ok", to.jsOK)
	w.mon.steer(to.host)
	// Closing the socket needs no lock, and a write to the silent server
	// blocked on it fails at once; nats.go then reconnects as after any
	// failed socket. ForceReconnect (for a connection Dial did not make, or
	// a socket closed already) takes the connection's lock, and waits for
	// the flusher's timeout when such a write holds it.
	if w.mon.socket != nil && w.mon.socket.drop() {
		return
	}
	if err := w.nc.ForceReconnect(); err != nil {
		w.log.Warn("NATS reconnect refused", "err", err)
	}
}
