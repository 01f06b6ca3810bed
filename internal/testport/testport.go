// Package testport hands tests loopback ports that stay theirs across a
// restart. A test that stops a server and starts it again on the same port
// (a NATS node killed and restarted, an MCP server restarted) cannot use
// port 0: the kernel gives ports from the ephemeral range, and in the
// moment between the stop and the start an outgoing connection of any
// process may be given the same port ("address already in use"). Ports
// below the ephemeral range are never handed out that way.
package testport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Free returns a loopback TCP port below the ephemeral range that was free
// when it was tried; the range falls back to port 0's when the ephemeral
// range leaves no room below it.
func Free(t testing.TB) int {
	t.Helper()
	low := ephemeralLow()
	for range 200 {
		if low <= minPort+1000 {
			break
		}
		p := minPort + rand.IntN(low-minPort)
		if _, taken := given.LoadOrStore(p, true); taken {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		_ = l.Close()
		return p
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testport: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// given holds the ports handed out in this process: a port a test gave up
// for a moment (a node killed before its restart) is never handed to
// another test of the same package.
var given sync.Map

// minPort is the lowest port Free hands out.
const minPort = 20000

// ephemeralLow is the first port of the kernel's ephemeral range (Linux;
// 32768 elsewhere or when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}
