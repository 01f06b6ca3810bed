package bus

import (
	"net"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
)

// socketDialer dials a connection's sockets (with the configured dialer,
// or a net.Dialer with nats.go's default timeout) and keeps the last, so
// that a Watchdog can
//
//   - tell whether the server sent anything at all lately: every byte
//     read counts (PONGs, acknowledgements, parts of a large message),
//     where nats.Conn's own counters see whole messages only;
//   - close the socket without the connection's lock: when a write to a
//     silent server holds that lock (for up to the flusher's timeout),
//     the write fails at once on the closed socket, and nats.go reconnects
//     as after any failed socket — where the ConnMonitor steers it.
//
// nats.go uses a custom dialer as it is: a host name resolving to several
// addresses gets the whole timeout per address, not a share of it.
type socketDialer struct {
	inner nats.CustomDialer
	read  atomic.Uint64 // bytes read from the connection's sockets

	mu      sync.Mutex
	conn    net.Conn
	dropped bool // drop closed the socket; the disconnect it causes is asked for
}

func newSocketDialer(inner nats.CustomDialer) *socketDialer {
	if inner == nil {
		inner = &net.Dialer{Timeout: nats.DefaultTimeout}
	}
	return &socketDialer{inner: inner}
}

// Dial dials address and keeps the socket as the connection's.
func (d *socketDialer) Dial(network, address string) (net.Conn, error) {
	c, err := d.inner.Dial(network, address)
	if err != nil {
		return nil, err
	}
	counted := &countedConn{Conn: c, read: &d.read}
	d.mu.Lock()
	d.conn, d.dropped = counted, false
	d.mu.Unlock()
	return counted, nil
}

// SkipTLSHandshake tells nats.go what the configured dialer does: one
// that makes TLS connections itself wants no second handshake.
func (d *socketDialer) SkipTLSHandshake() bool {
	s, ok := d.inner.(interface{ SkipTLSHandshake() bool })
	return ok && s.SkipTLSHandshake()
}

// bytesRead is how many bytes the connection's sockets have read.
func (d *socketDialer) bytesRead() uint64 { return d.read.Load() }

// drop closes the connection's socket; false when there is none (or it
// was closed already).
func (d *socketDialer) drop() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conn == nil || d.conn.Close() != nil {
		return false
	}
	d.conn, d.dropped = nil, true
	return true
}

// askedFor reports, once, whether drop caused the disconnect just seen.
func (d *socketDialer) askedFor() bool {
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	asked := d.dropped
	d.dropped = false
	return asked
}

// countedConn counts the bytes read from a socket.
type countedConn struct {
	net.Conn
	read *atomic.Uint64
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(uint64(n))
	return n, err
}
