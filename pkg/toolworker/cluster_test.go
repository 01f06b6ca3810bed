package toolworker_test

import (
	"fmt"
	"github.com/toolwire/toolwire/internal/testport"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// cluster is a three-node JetStream cluster in this process, whose nodes
// the test starts one by one.
type cluster struct {
	t       *testing.T
	clients [3]int // client ports
	routes  [3]int // cluster ports
	dirs    [3]string
	nodes   [3]*server.Server
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{t: t}
	for i := range 3 {
		c.clients[i], c.routes[i], c.dirs[i] = freePort(t), freePort(t), t.TempDir()
	}
	return c
}

// URL is node i's client URL.
func (c *cluster) URL(i int) string { return fmt.Sprintf("nats://127.0.0.1:%d", c.clients[i]) }

// start starts node i and waits until it accepts clients.
func (c *cluster) start(i int) {
	c.t.Helper()
	var routes []string
	for j, p := range c.routes {
		if j != i { // the cluster's size is the routes' count plus one
			routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
		}
	}
	opts := &server.Options{
		ServerName: fmt.Sprintf("node-%d", i), Host: "127.0.0.1", Port: c.clients[i],
		JetStream: true, StoreDir: c.dirs[i], JetStreamMaxMemory: 64 << 20, JetStreamMaxStore: 64 << 30, // limits, not allocations
		Cluster: server.ClusterOpts{Name: "toolworker-test", Host: "127.0.0.1", Port: c.routes[i]},
		Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		NoSigs:  true, NoLog: true,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		c.t.Fatalf("node %d: %v", i, err)
	}
	s.Start()
	c.t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(20 * time.Second) {
		c.t.Fatalf("node %d never accepted clients", i)
	}
	c.nodes[i] = s
}

// freePort returns a loopback port below the ephemeral range (testport):
// these tests start servers on ports clients already dial, and a dial of
// an ephemeral port nothing listens on can connect the client to itself
// and hold the port (a CI run saw "node 0 never accepted clients").
func freePort(t *testing.T) int { return testport.Free(t) }
