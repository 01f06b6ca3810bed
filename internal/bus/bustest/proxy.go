package bustest

import (
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Proxy forwards TCP connections to a server (a NATS server's client
// port) on a random loopback port, and fails them as a network does: cut
// (every forwarded connection closed, new ones refused) or muted (the
// server's bytes to the client read and lost, the connection left open: a
// silent server, or a link failed one way).
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	muted bool
	conns []net.Conn
	wg    sync.WaitGroup
}

// StartProxy starts a proxy to target (host:port); it stops when the test
// ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &Proxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.SetCut(true)
		p.wg.Wait()
	})
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(up, c, false)
		go p.pipe(c, up, true)
	}
}

// pipe copies src to dst; toClient is the server's direction, which
// SetMuted silences.
func (p *Proxy) pipe(dst, src net.Conn, toClient bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !(toClient && p.isMuted()) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = dst.Close()
	_ = src.Close()
}

func (p *Proxy) isMuted() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.muted
}

// SetMuted drops (or forwards again) what the server sends the client.
// What was dropped is lost: a connection muted and then unmuted sees the
// protocol resume mid-stream, as after a lost segment nothing resends.
func (p *Proxy) SetMuted(muted bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.muted = muted
}

// SetCut cuts (closing every forwarded connection) or restores the proxy.
func (p *Proxy) SetCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.conns = nil
	}
}
