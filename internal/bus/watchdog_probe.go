package bus

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Why a probe failed: the server did not answer a PING in time, or it did
// but its JetStream API did not answer (or answered that it cannot), or it
// stayed silent while another server answered a whole probe (Suspect).
const (
	reasonUnresponsive = "unresponsive"
	reasonJetStream    = "jetstream"
	reasonSlower       = "silent while another server answered"
)

// fasterBy is how many times as long as another server's whole probe took
// the connection's server must have left its probe unanswered for the
// connection to move before Timeout (WatchdogConfig.Suspect).
const fasterBy = 3

// probeResult is one probe of the connection's server. err is nil when
// the server is healthy, or when there is nothing to judge (the
// connection is reconnecting on its own, or has no other server to go
// to).
type probeResult struct {
	servers []string // the connection's pool (scheme://host:port); nil when not read
	reason  string
	err     error
	// reconnects is the ConnMonitor's count when the probe started: a
	// probe of a server the connection has since left judges nothing.
	reconnects uint64
}

// errProbeBlocked is a probe that could not even start within its
// timeout: the connection's lock is held, by a write to a server that
// stopped reading.
var errProbeBlocked = errors.New("the connection is blocked (a write to the server is stuck)")

// pendingProbe is the probe of the connection's server in flight.
type pendingProbe struct {
	done       chan probeResult
	since      time.Time
	reconnects uint64
	// read is the count of bytes the connection had read when the
	// watchdog last looked, heardAt when it last saw the count change (or
	// the probe's start).
	read    uint64
	heardAt time.Time
	// ponged is closed when the server has answered the probe's PING,
	// with servers (the connection's pool) set before; pongAt is when the
	// watchdog saw it (zero: not yet).
	ponged  chan struct{}
	servers []string
	pongAt  time.Time
}

// quietSince is when the server's silence began: at the PONG once it
// came (the JetStream request is unanswered), else when the watchdog
// last saw a message arrive, or the probe's start.
func (p *pendingProbe) quietSince() time.Time {
	if !p.pongAt.IsZero() {
		return p.pongAt
	}
	return p.heardAt
}

// stillQuiet reports whether the server is still silent in a way worth
// leaving it for: its JetStream API after the PONG, or, with no PONG
// yet, not a byte received since the watchdog last looked (which it
// notes: quietSince). A connection with much to send waits for its PONG
// behind its own bytes, but while it has anything coming (its
// acknowledgements, messages, part of a large one) it is not quiet; a
// frozen server, or one behind a cut link, sends nothing. (A connection
// that only sends, over a link so slow that its PONG waits behind its own
// bytes for Suspect, receives nothing either, and may be moved.)
func (p *pendingProbe) stillQuiet(read func() uint64) bool {
	if !p.pongAt.IsZero() {
		return true
	}
	if n := read(); n != p.read {
		p.read, p.heardAt = n, time.Now()
		return false
	}
	return true
}

// probe probes the connection's server in a goroutine of its own, and
// waits for it at most Timeout (plus a little for the scheduler): a probe
// that waits for the connection's lock longer is a failure, and no other
// probe starts until it has returned.
//
// A server that has stayed quiet (pendingProbe.stillQuiet) for Suspect is
// suspect: the other servers are probed (unless *others already does).
// Once one of them has answered its whole probe, the connection's server
// is asked again (the same JetStream request: one sent while a leader was
// being elected is never answered, and the other server's answer shows
// that the election, if any, is over); if it leaves that request
// unanswered fasterBy times as long as the other's probe took (and at
// least Suspect) and is still quiet, probe returns the other server to
// move to at once. When it answers, it is healthy.
func (w *Watchdog) probe(ctx context.Context, others **othersProbe) (probeResult, *candidate) {
	if w.probing != nil && w.probing.reconnects != w.mon.Reconnects() {
		w.probing = nil // of a connection since replaced: it ends on its own
	}
	if w.probing == nil {
		now := time.Now()
		p := &pendingProbe{done: make(chan probeResult, 1), ponged: make(chan struct{}), since: now, heardAt: now,
			reconnects: w.mon.Reconnects(), read: w.bytesRead()}
		w.probing = p
		w.wg.Go(func() { p.done <- w.probeCurrent(ctx, p) })
	}
	p := w.probing
	timeout := time.NewTimer(time.Until(p.since.Add(w.cfg.Timeout + 50*time.Millisecond)))
	defer timeout.Stop()
	var suspect, fast timer
	defer suspect.off()
	defer fast.off()
	suspect.at(p.quietSince().Add(w.cfg.Suspect))
	ponged := p.ponged
	if !p.pongAt.IsZero() {
		ponged = nil
	}
	suspected := false
	var again <-chan error // the server asked again
	var askedAt time.Time
	var faster *candidate
	race := func() { // ask the server again, against faster
		if faster == nil && suspected {
			if c, ok := (*others).first(); ok {
				faster = &c
				again, askedAt = w.askAgain(ctx), time.Now()
				fast.at(askedAt.Add(max(w.cfg.Suspect, fasterBy*c.took)))
			}
		}
	}
	for {
		select {
		case r := <-p.done:
			w.probing = nil
			r.reconnects = p.reconnects
			return r, nil
		case <-ponged:
			ponged, p.pongAt, w.servers = nil, time.Now(), p.servers
			switch {
			case !suspected:
				suspect.at(p.pongAt.Add(w.cfg.Suspect))
			case faster != nil && again != nil:
				// Alive after all: its JetStream's silence counts from now.
				fast.at(p.pongAt.Add(max(w.cfg.Suspect, fasterBy*faster.took)))
			}
		case <-suspect.c:
			suspect.off()
			if !p.stillQuiet(w.bytesRead) {
				suspect.at(p.quietSince().Add(w.cfg.Suspect))
				break
			}
			suspected = true
			if *others == nil {
				*others = w.startOthers(ctx, true)
			}
			race()
		case c := <-(*others).arrivals():
			(*others).got = append((*others).got, c)
			race()
		case err := <-again:
			again = nil
			fast.off()
			switch {
			case err == nil: // answered now: healthy (the first request was lost)
				w.probing = nil
				return probeResult{reconnects: p.reconnects}, nil
			case ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout):
				// It answered that it cannot (a 5xx, no leader, no quorum,
				// no responders) while another server can.
				w.probing = nil
				return probeResult{reason: reasonJetStream, err: err, reconnects: p.reconnects}, faster
			}
		case <-fast.c:
			fast.off()
			if !p.stillQuiet(w.bytesRead) {
				break // it is receiving again: the timeouts judge it
			}
			err := fmt.Errorf("no answer for %s; %s answered a probe on a new connection in %s",
				time.Since(askedAt).Round(time.Millisecond), faster.name, faster.took.Round(time.Millisecond))
			w.probing = nil // it ends on its own; the next probe is of the server moved to
			return probeResult{reason: reasonSlower, err: err, reconnects: p.reconnects}, faster
		case <-timeout.C:
			return probeResult{reason: reasonUnresponsive, err: errProbeBlocked, reconnects: p.reconnects}, nil
		case <-ctx.Done():
			return probeResult{}, nil
		}
	}
}

// askAgain sends the connection's server the JetStream probe's request
// once more, within Timeout; its answer comes on the channel.
func (w *Watchdog) askAgain(ctx context.Context) <-chan error {
	ch := make(chan error, 1)
	w.wg.Go(func() {
		ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
		defer cancel()
		ch <- jetStreamProbe(ctx, w.nc, w.cfg.Stream)
	})
	return ch
}

// timer is a time.Timer that may be off: its channel is then nil.
type timer struct {
	t *time.Timer
	c <-chan time.Time
}

// at sets the timer to fire at when (in the past: at once).
func (t *timer) at(when time.Time) {
	t.off()
	t.t = time.NewTimer(time.Until(when))
	t.c = t.t.C
}

// off stops the timer.
func (t *timer) off() {
	if t.t != nil {
		t.t.Stop()
	}
	t.t, t.c = nil, nil
}

// probeCurrent PINGs the connection's server, then (telling p) asks its
// JetStream API, within Timeout.
func (w *Watchdog) probeCurrent(ctx context.Context, p *pendingProbe) probeResult {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	r := probeResult{servers: w.nc.Servers()}
	if len(r.servers) < 2 || !w.nc.IsConnected() {
		return r // nowhere to go, or nats.go is already going
	}
	if err := w.nc.FlushWithContext(ctx); err != nil {
		r.reason, r.err = reasonUnresponsive, err
		return r
	}
	p.servers = r.servers
	close(p.ponged)
	if err := jetStreamProbe(ctx, w.nc, w.cfg.Stream); err != nil {
		r.reason, r.err = reasonJetStream, err
	}
	return r
}

// jsAPIAnswer is what the probe reads of a JetStream API answer.
type jsAPIAnswer struct {
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
	Cluster *struct {
		Leader   string `json:"leader"`
		Replicas []struct {
			Offline bool          `json:"offline"`
			Active  time.Duration `json:"active"` // since the leader last heard from it
		} `json:"replicas"`
	} `json:"cluster"`
}

// leaderContact is how recently a stream's leader must have heard from a
// replica for the replica to count toward its quorum in a probe: RAFT
// heartbeats go every second. A leader cut from its peers (a partition
// that leaves it reachable from clients) goes on answering stream info as
// the leader until it steps down; without this a watchdog would take it
// for the healthiest server there is.
const leaderContact = 3 * time.Second

// quorate reports whether the leader that answered has heard from a
// majority of the group (itself included) within leaderContact.
func (a *jsAPIAnswer) quorate() bool {
	if a.Cluster == nil || len(a.Cluster.Replicas) == 0 {
		return true // one replica: no quorum to lose
	}
	in := 1 // the leader
	for _, r := range a.Cluster.Replicas {
		if !r.Offline && r.Active < leaderContact {
			in++
		}
	}
	return 2*in > 1+len(a.Cluster.Replicas)
}

// jetStreamProbe asks nc's server for stream's info (or the account's,
// with stream ""). It fails when nobody answers in time, when the answer
// is a server error (5xx: JetStream unavailable or not enabled, the
// stream offline), a stream without a leader (a member that lost its
// leader answers from its own store), or a leader that has not heard from
// a majority of its replicas lately (quorate). A client error (4xx, such as a
// stream not found) is an answer: JetStream works.
func jetStreamProbe(ctx context.Context, nc *nats.Conn, stream string) error {
	subject := jsAPI + "INFO"
	if stream != "" {
		subject = jsAPI + "STREAM.INFO." + stream
	}
	msg, err := nc.RequestWithContext(ctx, subject, nil)
	if err != nil {
		return err
	}
	var a jsAPIAnswer
	if err := json.Unmarshal(msg.Data, &a); err != nil {
		return fmt.Errorf("unreadable JetStream API answer: %w", err)
	}
	switch {
	case a.Error != nil && a.Error.Code >= 500:
		return fmt.Errorf("JetStream API: %s (code %d, err_code %d)", a.Error.Description, a.Error.Code, a.Error.ErrCode)
	case a.Error == nil && stream != "" && a.Cluster != nil && a.Cluster.Leader == "":
		return fmt.Errorf("stream %s has no leader", stream)
	case a.Error == nil && stream != "" && !a.quorate():
		return fmt.Errorf("stream %s's leader %s has not heard from a majority of its replicas for %s", stream, a.Cluster.Leader, leaderContact)
	}
	return nil
}

// candidate is another server of the pool, as a probe found it.
type candidate struct {
	url, host, id, name string
	// tlsName is the name a TLS certificate of a server the pool found by
	// its IP address is checked against: the configured host's, as nats.go
	// does for its own reconnects. "" = the URL's host.
	tlsName      string
	pingOK, jsOK bool
	took         time.Duration // the whole probe, when jsOK
}

// othersProbe is the probes of the pool's other servers, started
// alongside a probe of the connection's server that may be the last
// failure before a move (or that has been silent for Suspect): the choice
// of a server to move to is then as fresh as the failure (probed later, a
// server might answer only because an election has ended meanwhile — and
// so would the connection's own).
type othersProbe struct {
	from  serverRef
	found chan candidate // one per server probed
	n     int
	got   []candidate // read from found so far, in order
}

// arrivals yields the probes of the other servers as they end, and
// nothing once all have (or for a nil o). What it yields is kept for
// choose.
func (o *othersProbe) arrivals() <-chan candidate {
	if o == nil || len(o.got) == o.n {
		return nil
	}
	return o.found
}

// first returns the first server probed so far whose JetStream answered
// (never the one being left).
func (o *othersProbe) first() (candidate, bool) {
	if o == nil {
		return candidate{}, false
	}
	for _, c := range o.got {
		if c.jsOK && !o.leaving(c) {
			return c, true
		}
	}
	return candidate{}, false
}

// leaving reports whether c is the server being left (by its id).
func (o *othersProbe) leaving(c candidate) bool { return c.id == o.from.id && o.from.id != "" }

// startOthers probes every other server of the pool at once, each on a
// connection of its own, when the probe about to start may move the
// connection (it would be the Failures-th failure in a row, or the
// connection's server has been silent for Suspect: suspect), and a move
// is allowed; nil otherwise. The probes end on their own (within twice
// Timeout), and Stop waits for them.
func (w *Watchdog) startOthers(ctx context.Context, suspect bool) *othersProbe {
	now := time.Now()
	if (!suspect && w.fails+1 < w.cfg.Failures) || !w.mayMove(now) {
		return nil
	}
	// While the connection stays on a sick server (no other was better),
	// the others are probed at most once a Period, however often failed
	// requests are reported: not a burst of connections per election.
	if now.Sub(w.othersAt) < w.cfg.Period {
		return w.recentOthers // as fresh as a Period
	}
	w.othersAt, w.recentOthers = now, nil
	from := w.mon.current()
	others := w.others(from)
	if len(others) == 0 {
		return nil
	}
	o := &othersProbe{from: from, found: make(chan candidate, len(others)), n: len(others)}
	for _, c := range others {
		w.wg.Go(func() { o.found <- w.probeOther(ctx, c) })
	}
	w.recentOthers = o
	return o
}

// choose returns the first server whose JetStream answered; for a server
// left for being unresponsive, failing that, one that answered the PING.
// A server whose id is the one being left is never chosen.
func (o *othersProbe) choose(reason string) (candidate, bool) {
	if o == nil {
		return candidate{}, false
	}
	for len(o.got) < o.n {
		o.got = append(o.got, <-o.found)
	}
	var fallback *candidate
	for _, c := range o.got {
		if o.leaving(c) {
			continue
		}
		if c.jsOK {
			return c, true
		}
		if c.pingOK && reason == reasonUnresponsive && fallback == nil {
			fallback = &c
		}
	}
	if fallback != nil {
		return *fallback, true
	}
	return candidate{}, false
}

// others are the servers of the pool but from's, with the URL a probe
// dials: the configured one when it names the same host (it may carry
// credentials), else the pool's — which nats.go lists without credentials,
// so a server the cluster advertised gets those of the first configured
// URL that has any, and, when it is an IP address, that URL's host as the
// name its TLS certificate is checked against (nats.go does both for its
// own connections to such servers).
func (w *Watchdog) others(from serverRef) []candidate {
	configured := map[string]string{}
	var user *url.Userinfo
	var tlsName string
	for _, s := range strings.Split(w.conn.URL, ",") {
		u, host := parseServerURL(s)
		if host == "" {
			continue
		}
		configured[host] = u
		if pu, err := url.Parse(u); err == nil {
			if user == nil && pu.User != nil {
				user = pu.User
			}
			if tlsName == "" && net.ParseIP(pu.Hostname()) == nil {
				tlsName = pu.Hostname()
			}
		}
	}
	_, fromHost := parseServerURL(from.url)
	var out []candidate
	for _, s := range w.servers {
		u, host := parseServerURL(s)
		if host == "" || host == fromHost {
			continue
		}
		c := candidate{url: configured[host], host: host}
		if c.url == "" {
			c.url, c.tlsName = advertised(u, user, tlsName)
		}
		out = append(out, c)
	}
	return out
}

// advertised is the URL a probe dials for a server the cluster
// advertised (u): with the configured credentials, and the TLS name to
// check an IP address's certificate against.
func advertised(u string, user *url.Userinfo, tlsName string) (string, string) {
	pu, err := url.Parse(u)
	if err != nil {
		return u, ""
	}
	if pu.User == nil && user != nil {
		pu.User = user
	}
	if net.ParseIP(pu.Hostname()) == nil {
		tlsName = ""
	}
	return pu.String(), tlsName
}

// parseServerURL returns a NATS server URL as nats.go reads it (scheme
// nats:// and port 4222 unless given) and its host:port; host is "" for
// an unparsable one.
func parseServerURL(s string) (string, string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", ""
	}
	if !strings.Contains(s, "://") {
		s = "nats://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Hostname() == "" {
		return "", ""
	}
	if u.Port() == "" {
		u.Host += ":4222"
	}
	return u.String(), u.Host
}

// probeOther connects to c on a connection of its own (no reconnects),
// PINGs it and asks its JetStream API, each within Timeout.
func (w *Watchdog) probeOther(ctx context.Context, c candidate) candidate {
	start := time.Now()
	opts, err := baseOptions(w.conn)
	if err != nil {
		return c
	}
	opts = append(opts, nats.Name(w.conn.Name+" (watchdog probe)"), nats.NoReconnect(), nats.Timeout(w.cfg.Timeout),
		nats.FlusherTimeout(w.cfg.Timeout), nats.IgnoreDiscoveredServers(), nats.NoCallbacksAfterClientClose())
	if c.tlsName != "" && strings.HasPrefix(c.url, "tls://") {
		opts = append(opts, nats.Secure(&tls.Config{ServerName: c.tlsName, MinVersion: tls.VersionTLS12}))
	}
	nc, err := nats.Connect(c.url, opts...)
	if err != nil {
		return c
	}
	defer nc.Close()
	c.id, c.name = nc.ConnectedServerId(), nc.ConnectedServerName()
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	if nc.FlushWithContext(ctx) != nil {
		return c
	}
	c.pingOK = true
	c.jsOK = jetStreamProbe(ctx, nc, w.cfg.Stream) == nil
	c.took = time.Since(start)
	return c
}
