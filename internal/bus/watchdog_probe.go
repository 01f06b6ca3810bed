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
// but its JetStream API did not answer (or answered that it cannot).
const (
	reasonUnresponsive = "unresponsive"
	reasonJetStream    = "jetstream"
)

// probeResult is one probe of the connection's server. err is nil when
// the server is healthy, or when there is nothing to judge (the
// connection is reconnecting on its own, or has no other server to go
// to).
type probeResult struct {
	servers []string // the connection's pool (scheme://host:port); nil when not read
	reason  string
	err     error
}

// errProbeBlocked is a probe that could not even start within its
// timeout: the connection's lock is held, by a write to a server that
// stopped reading.
var errProbeBlocked = errors.New("the connection is blocked (a write to the server is stuck)")

// probe probes the connection's server in a goroutine of its own, and
// waits for it at most Timeout (plus a little for the scheduler): a probe
// that waits for the connection's lock longer is a failure, and no other
// probe starts until it has returned.
func (w *Watchdog) probe(ctx context.Context) probeResult {
	if w.probing == nil {
		ch := make(chan probeResult, 1)
		w.probing = ch
		w.wg.Go(func() { ch <- w.probeCurrent(ctx) })
	}
	t := time.NewTimer(w.cfg.Timeout + 50*time.Millisecond)
	defer t.Stop()
	select {
	case r := <-w.probing:
		w.probing = nil
		return r
	case <-t.C:
		return probeResult{reason: reasonUnresponsive, err: errProbeBlocked}
	case <-ctx.Done():
		return probeResult{}
	}
}

// probeCurrent PINGs the connection's server, then asks its JetStream API,
// within Timeout.
func (w *Watchdog) probeCurrent(ctx context.Context) probeResult {
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
}

// othersProbe is the probes of the pool's other servers, started
// alongside a probe of the connection's server that may be the last
// failure before a move: the choice of a server to move to is then as
// fresh as the failure (probed later, a server might answer only because
// an election has ended meanwhile — and so would the connection's own).
type othersProbe struct {
	from  serverRef
	found chan candidate // one per server probed
	n     int
}

// startOthers probes every other server of the pool at once, each on a
// connection of its own, when the probe about to start may move the
// connection (it would be the Failures-th failure in a row, and a move is
// allowed); nil otherwise. The probes end on their own (within twice
// Timeout), and Stop waits for them.
func (w *Watchdog) startOthers(ctx context.Context) *othersProbe {
	now := time.Now()
	if w.fails+1 < w.cfg.Failures || !w.mayMove(now) {
		return nil
	}
	// While the connection stays on a sick server (no other was better),
	// the others are probed at most once a Period, however often failed
	// requests are reported: not a burst of connections per election.
	if now.Sub(w.othersAt) < w.cfg.Period {
		return nil
	}
	w.othersAt = now
	from := w.mon.current()
	others := w.others(from)
	if len(others) == 0 {
		return nil
	}
	o := &othersProbe{from: from, found: make(chan candidate, len(others)), n: len(others)}
	for _, c := range others {
		w.wg.Go(func() { o.found <- w.probeOther(ctx, c) })
	}
	return o
}

// choose returns the first server whose JetStream answered; for a server
// left for being unresponsive, failing that, one that answered the PING.
// A server whose id is the one being left is never chosen.
func (o *othersProbe) choose(reason string) (candidate, bool) {
	if o == nil {
		return candidate{}, false
	}
	var fallback *candidate
	for range o.n {
		c := <-o.found
		if c.id == o.from.id && o.from.id != "" {
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
	return c
}
