//go:build linux

package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/toolwire/toolwire/internal/executors/sandbox"
	"github.com/toolwire/toolwire/internal/testdeps"
)

// newEgressRig makes an executor for network tools that lets allowedHost
// through and names loopResolver as the resolver, in namespace ns.
func newEgressRig(t *testing.T, ns *testNetns) *egressRig {
	t.Helper()
	resolvConf := filepath.Join(t.TempDir(), "resolv.conf")
	require.NoError(t, os.WriteFile(resolvConf, []byte("nameserver "+loopResolver+"\n"), 0o644))
	e, err := sandbox.New(sandbox.Config{HostNetwork: true, EgressAllowNetworks: []string{allowedHost + "/32"}, ResolvConf: resolvConf})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, e.Close(ctx))
	})
	if gaps := e.SpecIsolationGaps(spec(fixture("connect"), withNetwork)); len(gaps) > 1 {
		testdeps.Missing(t, "Linux 5.6 with Landlock ABI 4", "egress test: this host's gaps for network tools: %v", gaps)
	}
	return &egressRig{t: t, ns: ns, e: e}
}

// text calls and returns the result's text, failing on an error.
func (r *egressRig) text(mode string, args ...string) string {
	r.t.Helper()
	res, err := r.call(mode, args...)
	require.NoError(r.t, err, "%s %v", mode, args)
	return res.Content[0].GetText().GetText()
}

// serveStream accepts TCP connections on addr in the namespace; once
// goAddr (when not empty) saw a connection too, it reads each to its
// end, whose bytes arrive on the channel.
func (ns *testNetns) serveStream(t *testing.T, addr, goAddr string) <-chan []byte {
	t.Helper()
	listen := func(a string) net.Listener {
		var l net.Listener
		require.NoError(t, ns.do(func() (err error) { l, err = net.Listen("tcp", a); return err }))
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	l := listen(addr)
	var goL net.Listener
	if goAddr != "" {
		goL = listen(goAddr)
	}
	got := make(chan []byte, 8)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if goL != nil {
				g, err := goL.Accept()
				if err != nil {
					_ = c.Close()
					return
				}
				_ = g.Close()
			}
			b, _ := io.ReadAll(c)
			_ = c.Close()
			got <- b
		}
	}()
	return got
}

// receive waits for one value of ch.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute): // far below the package's timeout; loopback delivers at once
		t.Fatalf("%s: nothing arrived", what)
	}
	panic("unreachable")
}

// A network tool cannot source-route: IP_OPTIONS (IPv4 loose and strict
// source routing, which need no privilege and make the kernel send to
// the first hop instead of the checked address) and IPv6 routing headers
// (IPV6_RTHDR, which needs no CAP_NET_RAW, and the RFC 2292 options) fail
// with EPERM as socket options, and as control messages with EACCES (the
// guard refuses every control message), here on datagrams to the
// resolver, a destination the guard allows.
func TestNetworkToolSourceRouting(t *testing.T) {
	t.Parallel()
	ns := newTestNetns(t)
	resolver := ns.serveUDP(t, loopResolver+":53")
	r := newEgressRig(t, ns)
	out := r.text("srcroute", loopResolver+":53")
	for _, want := range []string{"ip_options=1\n", "ip_options_tcp=1\n", "ipv6_rthdr=1\n", "ipv6_2292pktoptions=1\n",
		"ipv6_2292rthdr=1\n", "cmsg_ip_retopts=13\n", "cmsg_ipv6_rthdr=13\n"} {
		require.Contains(t, out, want, "the fixture printed:\n%s", out)
	}
	require.Empty(t, resolver, "a datagram with a control message was sent")
}

// sendmmsg(2) on a TCP stream stops, as the kernel's does, after a
// message sent short (here one cut to the guard's 64 KiB): a program
// that writes the rest of that message before it sends the next ones
// keeps its stream in order. A datagram too big for UDP after a first
// one: the first is sent and the count is 1, not EMSGSIZE.
func TestNetworkToolSendmmsgStops(t *testing.T) {
	t.Parallel()
	ns := newTestNetns(t, allowedHost)
	stream := ns.serveStream(t, allowedHost+":80", "")
	resolver := ns.serveUDP(t, loopResolver+":53")
	r := newEgressRig(t, ns)

	r.ok("tcpmmsg", allowedHost+":80")
	big := make([]byte, 70000)
	for i := range big {
		big[i] = byte(i % 251)
	}
	got := receive(t, stream, "the stream")
	require.True(t, bytes.Equal(append(big, "tail"...), got), "the stream of %d bytes is not the program's 70004 bytes in order", len(got))

	r.ok("udpmmsg-big", loopResolver+":53")
	require.Equal(t, "first", receive(t, resolver, "the first datagram"))
}

// A signal to a thread whose sendmsg(2) the worker is making does not
// make it twice: once the worker has received the notification, the
// thread waits killably (SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV), so a
// handled signal (SA_RESTART, as Go installs its handlers) stays pending
// until the call is over instead of restarting it. The fixture fills the
// connection so that the worker's send blocks, signals the sending
// thread until a signal stays pending, then lets the peer read: the 1000
// bytes of its sendmsg arrive once.
func TestNetworkToolSignalDuringSend(t *testing.T) {
	t.Parallel()
	if !kernelAtLeast(t, 5, 19) {
		testdeps.Missing(t, "Linux 5.19", "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV: a handled signal restarts a guarded call")
	}
	ns := newTestNetns(t, allowedHost)
	stream := ns.serveStream(t, allowedHost+":80", allowedHost+":443")
	r := newEgressRig(t, ns)
	out := r.text("sigsend", allowedHost+":80", allowedHost+":443")
	t.Logf("sigsend: %s", out)
	require.Contains(t, out, "held=true", "no signal was held while the worker made the call")
	got := receive(t, stream, "the stream")
	require.Equal(t, 1000, bytes.Count(got, []byte("M")), "bytes of the signalled sendmsg that arrived")
	require.Equal(t, len(got), bytes.IndexByte(got, 'M')+1000, "the sendmsg's bytes are not the end of the stream")
}

// kernelAtLeast reports whether the running kernel is major.minor or later.
func kernelAtLeast(t *testing.T, major, minor int) bool {
	t.Helper()
	var u unix.Utsname
	require.NoError(t, unix.Uname(&u))
	var maj, mnr int
	_, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &maj, &mnr)
	require.NoError(t, err)
	return maj > major || maj == major && mnr >= minor
}
