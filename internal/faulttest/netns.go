package faulttest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/testdeps"
)

// The network-namespace harness: a hub namespace holding a Linux bridge,
// and one namespace per member (a nats-server node, the workers, the
// dispatcher) joined to the bridge by a veth pair. Every address is in
// netPrefix, a /24 that exists only inside these namespaces: nothing is
// ever sent outside them. Faults are link changes on the hub side of a
// member's veth (silent: no RST reaches either end) and blackhole routes
// inside a member's namespace. doc.go, "Network partitions".

// netPrefix is the /24 of every address of a Net; the hub's bridge has
// .1. Each Net has its own bridge in its own namespace, so two runs at
// once may use the same addresses.
const netPrefix = "10.213.7."

// nsPrefix begins the name of every namespace a Net makes, followed by
// the test process's pid and a random suffix: "twft-<pid>-<hex>-<role>".
// A namespace whose pid is no longer running was left by a killed run and
// is removed by the next NewNet (with the processes still in it).
const nsPrefix = "twft-"

// Net is a set of network namespaces made for one test: the hub (a bridge
// at netPrefix.1) and its members. Everything is deleted when the test
// ends, passed or failed.
type Net struct {
	t testing.TB
	// run is this Net's prefix of namespace names ("twft-<pid>-<hex>-").
	run string
	// Hub is the namespace holding the bridge; the harness observes the
	// cluster from it (it reaches every member whose link is up).
	Hub *Netns
	mu  sync.Mutex
	// members by role.
	members map[string]*Netns
}

// Netns is one network namespace of a Net.
type Netns struct {
	// Role names the member: "n0", "workers", "dispatcher", "hub".
	Role string
	// Name is the namespace's name (ip netns list; /run/netns/Name).
	Name string
	// IP is the member's address, in netPrefix.
	IP string
	// veth is the name of the hub's end of the member's veth pair ("" for
	// the hub).
	veth string
}

// NewNet makes the hub namespace: a bridge at netPrefix.1. A host where
// namespaces cannot be made (not root, no ip binary) ends the test
// through testdeps.Missing: a failure with CI=true, a skip otherwise.
func NewNet(t testing.TB) *Net {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		testdeps.Missing(t, "install iproute2", "faulttest: network namespaces: no ip binary: %v", err)
	}
	sweepStaleNamespaces(t)
	n := &Net{t: t, run: fmt.Sprintf("%s%d-%04x-", nsPrefix, os.Getpid(), rand.Uint32N(1<<16)), members: map[string]*Netns{}}
	// Registered first, so it runs last: after every process in the
	// namespaces was killed. The veth pairs and the bridge go with them.
	t.Cleanup(n.deleteAll)
	n.Hub = &Netns{Role: "hub", Name: n.run + "hub", IP: netPrefix + "1"}
	if err := ipCmd("netns", "add", n.Hub.Name); err != nil {
		testdeps.Missing(t, "run as root (CAP_SYS_ADMIN and CAP_NET_ADMIN)", "faulttest: network namespaces: %v", err)
	}
	n.setup(
		[]string{"-n", n.Hub.Name, "link", "set", "lo", "up"},
		[]string{"-n", n.Hub.Name, "link", "add", "br0", "type", "bridge"},
		[]string{"-n", n.Hub.Name, "addr", "add", n.Hub.IP + "/24", "dev", "br0"},
		[]string{"-n", n.Hub.Name, "link", "set", "br0", "up"},
	)
	return n
}

// Add makes one member namespace per role, joined to the hub's bridge by
// a veth pair ("v<role>" on the hub's side, eth0 in the member), with
// the addresses netPrefix.(firstIP+i) in the order given.
func (n *Net) Add(firstIP int, roles ...string) {
	n.t.Helper()
	for i, role := range roles {
		m := &Netns{Role: role, Name: n.run + role, IP: netPrefix + strconv.Itoa(firstIP+i), veth: "v" + role}
		if len(m.veth) > 15 || firstIP+i < 2 || firstIP+i > 254 {
			n.t.Fatalf("faulttest: namespace %q at .%d: bad role or address", role, firstIP+i)
		}
		n.mu.Lock()
		_, dup := n.members[role]
		n.members[role] = m
		n.mu.Unlock()
		if dup {
			n.t.Fatalf("faulttest: namespace %q made twice", role)
		}
		n.setup(
			[]string{"netns", "add", m.Name},
			[]string{"-n", n.Hub.Name, "link", "add", m.veth, "type", "veth", "peer", "name", "eth0", "netns", m.Name},
			[]string{"-n", n.Hub.Name, "link", "set", m.veth, "master", "br0"},
			[]string{"-n", n.Hub.Name, "link", "set", m.veth, "up"},
			[]string{"-n", m.Name, "link", "set", "lo", "up"},
			[]string{"-n", m.Name, "addr", "add", m.IP + "/24", "dev", "eth0"},
			[]string{"-n", m.Name, "link", "set", "eth0", "up"},
		)
	}
}

// setup runs each command with ip; the first that fails fails the test.
func (n *Net) setup(cmds ...[]string) {
	n.t.Helper()
	for _, args := range cmds {
		if err := ipCmd(args...); err != nil {
			n.t.Fatalf("faulttest: network namespaces: %v", err)
		}
	}
}

// Member returns the member namespace of role; it fails the test when
// there is none.
func (n *Net) Member(role string) *Netns {
	n.mu.Lock()
	defer n.mu.Unlock()
	m, ok := n.members[role]
	if !ok {
		n.t.Fatalf("faulttest: no namespace %q", role)
	}
	return m
}

// LinkDown sets the hub's end of m's veth down: m loses its carrier and
// nothing passes either way. Nothing tells the other end of a connection:
// no RST, no FIN; what m had in flight stays unacknowledged.
func (n *Net) LinkDown(m *Netns) error {
	return ipCmd("-n", n.Hub.Name, "link", "set", m.veth, "down")
}

// LinkUp heals LinkDown.
func (n *Net) LinkUp(m *Netns) error {
	return ipCmd("-n", n.Hub.Name, "link", "set", m.veth, "up")
}

// Blackhole adds, inside from's namespace, a blackhole route to each of
// to: from can no longer send to them (its packets are dropped before
// they leave, silently for the other end), while they can still send to
// from, and from still talks to everyone else. Blackholes both ways make
// a symmetric partition between from and to.
func (n *Net) Blackhole(from *Netns, to ...*Netns) error {
	for _, m := range to {
		if err := ipCmd("-n", from.Name, "route", "add", "blackhole", m.IP+"/32"); err != nil {
			return err
		}
	}
	return nil
}

// Unblackhole removes the routes Blackhole added (every one of to, even
// after an error; the errors are joined).
func (n *Net) Unblackhole(from *Netns, to ...*Netns) error {
	var errs []error
	for _, m := range to {
		errs = append(errs, ipCmd("-n", from.Name, "route", "del", "blackhole", m.IP+"/32"))
	}
	return errors.Join(errs...)
}

// Flap takes m's link down for down, then up for up, times times: the
// first change before it returns, the rest in a goroutine the test owns
// through the Flapper (Wait, Stop).
func (n *Net) Flap(m *Netns, down, up time.Duration, times int) (*Flapper, error) {
	f := &Flapper{n: n, m: m, stop: make(chan struct{}), done: make(chan struct{})}
	if times <= 0 {
		close(f.done)
		return f, nil
	}
	f.Downs = append(f.Downs, time.Now())
	if err := n.LinkDown(m); err != nil {
		close(f.done)
		return nil, err
	}
	go f.run(down, up, times)
	return f, nil
}

// Flapper is a link flapping (Net.Flap).
type Flapper struct {
	n        *Net
	m        *Netns
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	// err is the first failed link change; Downs are when the link went
	// down. Both read after done.
	err   error
	Downs []time.Time
}

func (f *Flapper) run(down, up time.Duration, times int) {
	defer close(f.done)
	defer func() {
		// Whatever happened, the link is left up.
		if err := f.n.LinkUp(f.m); err != nil && f.err == nil {
			f.err = err
		}
	}()
	for i := range times {
		if i > 0 {
			f.Downs = append(f.Downs, time.Now())
			if f.err = f.n.LinkDown(f.m); f.err != nil {
				return
			}
		}
		if !f.hold(down) {
			return
		}
		if f.err = f.n.LinkUp(f.m); f.err != nil {
			return
		}
		if i < times-1 && !f.hold(up) {
			return
		}
	}
}

// hold waits d (the fault's own duration, not a synchronisation); false
// when stopped first.
func (f *Flapper) hold(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-f.stop:
		return false
	}
}

// Wait waits until the flapping ended (the link up again) and returns the
// first link change that failed.
func (f *Flapper) Wait() error {
	<-f.done
	return f.err
}

// Stop ends the flapping early, leaves the link up and waits; safe to
// call more than once and after the end.
func (f *Flapper) Stop() error {
	f.stopOnce.Do(func() { close(f.stop) })
	return f.Wait()
}

// DialContext connects to address from inside the namespace: the socket
// is made there (a socket keeps the namespace it was made in), on a
// thread of its own (netns_linux.go). address must be an IP literal with a
// port (no name lookups from inside a namespace).
func (ns *Netns) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var conn net.Conn
	err := inNetns(ns.Name, func() error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, network, address)
		return err
	})
	if err != nil {
		if conn != nil {
			conn.Close()
		}
		return nil, fmt.Errorf("faulttest: dial %s from namespace %s: %w", address, ns.Role, err)
	}
	return conn, nil
}

// Listen listens on address inside the namespace (address an IP
// literal of the namespace with a port), for tests of the harness.
func (ns *Netns) Listen(network, address string) (net.Listener, error) {
	var l net.Listener
	err := inNetns(ns.Name, func() error {
		var err error
		l, err = net.Listen(network, address)
		return err
	})
	if err != nil {
		if l != nil {
			l.Close()
		}
		return nil, fmt.Errorf("faulttest: listen on %s in namespace %s: %w", address, ns.Role, err)
	}
	return l, nil
}

// Dial is DialContext bounded by 2 s (nats.go's connect timeout): the
// nats.CustomDialer of a connection made from the namespace.
func (ns *Netns) Dial(network, address string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return ns.DialContext(ctx, network, address)
}

// Exec returns the arguments that run bin with args inside the namespace:
// "ip netns exec NAME bin args..." (ip executes bin in its own process,
// so the pid is bin's).
func (ns *Netns) Exec(bin string, args ...string) (string, []string) {
	return "ip", append([]string{"netns", "exec", ns.Name, bin}, args...)
}

// deleteAll deletes every namespace of this Net (the veth pairs and the
// bridge go with them); a namespace that cannot be deleted is reported.
func (n *Net) deleteAll() {
	for _, name := range namespaces(n.run) {
		if err := ipCmd("netns", "del", name); err != nil {
			n.t.Errorf("faulttest: %v", err)
		}
	}
}

// sweepStaleNamespaces removes the namespaces a killed earlier run left
// (nsPrefix, the pid of a process that no longer exists), killing the
// processes still in them (that run's nats-servers and workers, which
// outlive it: they run in process groups of their own). Nothing else is
// touched: a namespace of a run still going is left alone.
func sweepStaleNamespaces(t testing.TB) {
	t.Helper()
	for _, name := range namespaces(nsPrefix) {
		pidText, _, _ := strings.Cut(strings.TrimPrefix(name, nsPrefix), "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue // not ours, or its run is still going
		}
		out, err := exec.Command("ip", "netns", "pids", name).Output()
		if err == nil {
			for _, f := range strings.Fields(string(out)) {
				if p, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
			}
		}
		if err := ipCmd("netns", "del", name); err != nil {
			t.Logf("faulttest: stale namespace %s: %v", name, err)
		} else {
			t.Logf("faulttest: removed the stale namespace %s of a killed run", name)
		}
	}
}

// namespaces lists the named network namespaces whose name begins with
// prefix.
func namespaces(prefix string) []string {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// ipCmd runs the ip binary with args (never through a shell).
func ipCmd(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
