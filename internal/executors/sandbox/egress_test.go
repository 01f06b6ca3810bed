//go:build linux

package sandbox_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/toolwire/toolwire/internal/executors/sandbox"
	"github.com/toolwire/toolwire/internal/testdeps"
	"github.com/toolwire/toolwire/pkg/tool"
)

// The addresses of the egress tests' own hosts: all inside a network
// namespace the test makes (on a veth interface and loopback), so
// nothing is ever sent to such an address on the machine's network.
const (
	metadataHost = "169.254.169.254"
	privateHost  = "10.213.60.2"  // refused: a private address
	allowedHost  = "10.213.60.3"  // listed in egress_allow_networks
	loopResolver = "127.0.0.53"   // the resolver of the test's resolv.conf
	notResolver  = "127.0.0.1:53" // DNS's port, on an address that is not a resolver
)

// testNetns is a network namespace of one test, with a veth pair (both
// ends inside) whose eg0 holds the test hosts' addresses, deleted when
// the test ends.
type testNetns struct{ name string }

func newTestNetns(t *testing.T, addrs ...string) *testNetns {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		testdeps.Missing(t, "install iproute2", "egress test: no ip binary: %v", err)
	}
	ns := &testNetns{name: fmt.Sprintf("twsb-%d-%04x", os.Getpid(), rand.Uint32N(1<<16))}
	if err := ipRun("netns", "add", ns.name); err != nil {
		testdeps.Missing(t, "run as root (CAP_SYS_ADMIN and CAP_NET_ADMIN)", "egress test: network namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := ipRun("netns", "del", ns.name); err != nil {
			t.Errorf("egress test: %v", err)
		}
	})
	cmds := [][]string{
		{"-n", ns.name, "link", "set", "lo", "up"},
		{"-n", ns.name, "link", "add", "eg0", "type", "veth", "peer", "name", "eg1"},
		{"-n", ns.name, "link", "set", "eg0", "up"},
		{"-n", ns.name, "link", "set", "eg1", "up"},
	}
	for _, a := range addrs {
		cmds = append(cmds, []string{"-n", ns.name, "addr", "add", a + "/32", "dev", "eg0"})
	}
	for _, c := range cmds {
		require.NoError(t, ipRun(c...))
	}
	return ns
}

func ipRun(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// do runs fn on a thread moved into the namespace: sockets it makes, and
// processes it starts (a network tool's sandbox shares the network
// namespace of the thread that starts it), are the namespace's. A thread
// that cannot be moved back stays locked and ends with its goroutine.
func (ns *testNetns) do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open(filepath.Join("/run/netns", ns.name))
		if err != nil {
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		}
		errc <- ferr
	}()
	return <-errc
}

// serveTCP listens on addr in the namespace and counts the connections.
func (ns *testNetns) serveTCP(t *testing.T, addr string) *atomic.Int32 {
	t.Helper()
	var l net.Listener
	require.NoError(t, ns.do(func() (err error) { l, err = net.Listen("tcp", addr); return err }))
	t.Cleanup(func() { _ = l.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			_ = c.Close()
		}
	}()
	return &n
}

// serveUDP listens on addr in the namespace; datagrams' payloads arrive
// on the channel.
func (ns *testNetns) serveUDP(t *testing.T, addr string) <-chan string {
	t.Helper()
	var c net.PacketConn
	require.NoError(t, ns.do(func() (err error) { c, err = net.ListenPacket("udp", addr); return err }))
	t.Cleanup(func() { _ = c.Close() })
	got := make(chan string, 1024)
	go func() {
		buf := make([]byte, 64)
		for {
			n, _, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			select {
			case got <- string(buf[:n]):
			default: // the test fails on far fewer
			}
		}
	}()
	return got
}

// A network tool on a worker that shares its network namespace with
// loopback services and a cloud metadata address: the egress guard
// refuses loopback, the metadata address and a private address on an
// egress port (TCP, and UDP through sendto and sendmsg), lets through an
// address the operator listed and the configured resolver on port 53.
func TestNetworkToolEgressGuard(t *testing.T) {
	t.Parallel()
	ns := newTestNetns(t, metadataHost, privateHost, allowedHost)
	tcp := map[string]*atomic.Int32{}
	for _, a := range []string{"127.0.0.1:80", metadataHost + ":80", privateHost + ":80", allowedHost + ":80"} {
		tcp[a] = ns.serveTCP(t, a)
	}
	resolver, notRes, metaUDP := ns.serveUDP(t, loopResolver+":53"), ns.serveUDP(t, notResolver), ns.serveUDP(t, metadataHost+":80")
	resolvConf := filepath.Join(t.TempDir(), "resolv.conf")
	require.NoError(t, os.WriteFile(resolvConf, []byte("# test\nnameserver "+loopResolver+"\n"), 0o644))

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
	r := &egressRig{t: t, ns: ns, e: e}

	for _, a := range []string{"127.0.0.1:80", metadataHost + ":80", privateHost + ":80"} {
		te := r.failure("connect", a)
		require.Contains(t, te.Message, "permission denied", "connect to %s", a)
	}
	r.ok("connect", allowedHost+":80")
	require.Eventually(t, func() bool { return tcp[allowedHost+":80"].Load() == 1 }, time.Minute, 10*time.Millisecond,
		"the allowed host saw no connection")
	for a, n := range tcp {
		if a != allowedHost+":80" {
			require.Zero(t, n.Load(), "connections seen on %s", a)
		}
	}

	for _, a := range []string{"[::1]:80", "[::ffff:127.0.0.1]:80", "[::ffff:169.254.169.254]:80"} {
		require.Contains(t, r.failure("connect6", a).Message, "permission denied", "connect6 to %s", a)
	}

	for _, mode := range []string{"udp", "udpmsg"} {
		require.Contains(t, r.failure(mode, metadataHost+":80").Message, "permission denied", mode)
		require.Contains(t, r.failure(mode, notResolver).Message, "permission denied", mode)
		r.ok(mode, loopResolver+":53")
		select {
		case <-resolver:
		case <-time.After(time.Minute): // far below the package's timeout; loopback delivers at once
			t.Fatalf("%s: the resolver saw no datagram", mode)
		}
	}
	for _, mode := range []string{"udpmmsg", "udpmmsg-connected"} {
		require.Contains(t, r.failure(mode, metadataHost+":80").Message, "permission denied", mode)
		require.Contains(t, r.failure(mode, notResolver).Message, "permission denied", mode)
		r.ok(mode, loopResolver+":53")
		for range 2 {
			select {
			case <-resolver:
			case <-time.After(time.Minute):
				t.Fatalf("%s: the resolver saw fewer than two datagrams", mode)
			}
		}
	}
	require.Empty(t, notRes, "the guard let a datagram reach port 53 of an address that is not a resolver")
	require.Empty(t, metaUDP, "the guard let a datagram reach the metadata address")
}

// A network tool racing the egress guard: one thread keeps flipping the
// address of a sockaddr between an allowed destination and refused ones
// while another connects (or sends datagrams) through it. The guard must
// use the address it checked, so no connection and no datagram ever
// reaches a refused listener.
func TestNetworkToolEgressGuardRace(t *testing.T) {
	t.Parallel()
	ns := newTestNetns(t, metadataHost, allowedHost)
	allowed := ns.serveTCP(t, allowedHost+":80")
	refused := []*atomic.Int32{ns.serveTCP(t, metadataHost+":80"), ns.serveTCP(t, "127.0.0.1:80")}
	resolver, metaUDP := ns.serveUDP(t, loopResolver+":53"), ns.serveUDP(t, metadataHost+":53")
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
	race := func(args ...string) {
		var res *tool.Result
		require.NoError(t, ns.do(func() (err error) {
			res, err = call(t.Context(), e, spec(fixture("race", append([]string{"--"}, args...)...), withNetwork), `{}`)
			return err
		}))
		t.Logf("race %v: %s", args, res.Content[0].GetText().GetText())
	}
	race("tcp", "80", allowedHost, metadataHost, "127.0.0.1")
	require.NotZero(t, allowed.Load(), "no connection reached the allowed host")
	for i, n := range refused {
		require.Zero(t, n.Load(), "connections reached refused listener %d", i)
	}
	race("udp", "53", loopResolver, metadataHost)
	select {
	case <-resolver:
	case <-time.After(time.Minute):
		t.Fatal("the resolver saw no datagram")
	}
	// A marker sent after the race: what the tool got through arrived
	// before it on the same socket (loopback, one sender's CPU aside, so
	// this is as good as the kernel's ordering allows).
	require.NoError(t, ns.do(func() error {
		c, err := net.Dial("udp", metadataHost+":53")
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("marker"))
		return err
	}))
	var leaked int
	for got := ""; got != "marker"; {
		select {
		case got = <-metaUDP:
			if got != "marker" {
				leaked++
			}
		case <-time.After(time.Minute):
			t.Fatal("the marker datagram did not arrive")
		}
	}
	require.Zero(t, leaked, "datagrams of the tool reached the metadata address")
}

// egressRig calls tools from inside the test's namespace.
type egressRig struct {
	t  *testing.T
	ns *testNetns
	e  *sandbox.Executor
}

func (r *egressRig) call(mode string, args ...string) (res *tool.Result, err error) {
	require.NoError(r.t, r.ns.do(func() error {
		res, err = call(r.t.Context(), r.e, spec(fixture(mode, append([]string{"--"}, args...)...), withNetwork), `{}`)
		return nil
	}))
	return res, err
}

// ok calls and fails the test on an error.
func (r *egressRig) ok(mode, addr string) {
	r.t.Helper()
	_, err := r.call(mode, addr)
	require.NoError(r.t, err, "%s %s", mode, addr)
}

// failure calls and returns the *tool.Error, failing on a result.
func (r *egressRig) failure(mode, addr string) *tool.Error {
	r.t.Helper()
	res, err := r.call(mode, addr)
	require.Error(r.t, err, "%s %s: want an error, got %v", mode, addr, res)
	var te *tool.Error
	require.ErrorAs(r.t, err, &te)
	return te
}
