package bus

import (
	"encoding/json"
	"testing"
)

// A server the cluster advertised (nats.go lists it without credentials)
// is probed with the configured URL's credentials, and, when it is an IP
// address, with the configured host as its certificate's name.
func TestAdvertisedServersGetTheConfiguredCredentials(t *testing.T) {
	w := &Watchdog{conn: ConnConfig{URL: "tls://user:secret@nats-0.nats:4222"},
		servers: []string{"tls://nats-0.nats:4222", "tls://10.0.0.7:4222", "tls://nats-2.nats:4222"}}
	got := map[string]candidate{}
	for _, c := range w.others(serverRef{url: "tls://nats-0.nats:4222"}) {
		got[c.host] = c
	}
	if len(got) != 2 {
		t.Fatalf("others = %v, want the two other servers", got)
	}
	if c := got["10.0.0.7:4222"]; c.url != "tls://user:secret@10.0.0.7:4222" || c.tlsName != "nats-0.nats" {
		t.Errorf("an advertised IP: url %q, TLS name %q", c.url, c.tlsName)
	}
	if c := got["nats-2.nats:4222"]; c.url != "tls://user:secret@nats-2.nats:4222" || c.tlsName != "" {
		t.Errorf("an advertised name: url %q, TLS name %q", c.url, c.tlsName)
	}
}

// A stream leader that has not heard from a majority of its replicas
// lately (cut from its peers, still reachable by clients) fails the
// probe; one replica is no quorum to lose.
func TestProbeWantsAQuorateLeader(t *testing.T) {
	for _, tc := range []struct {
		json string
		ok   bool
	}{
		{`{"cluster":{"leader":"n0","replicas":[{"active":500000000},{"active":800000000}]}}`, true},
		{`{"cluster":{"leader":"n0","replicas":[{"active":500000000},{"active":9000000000}]}}`, true},
		{`{"cluster":{"leader":"n0","replicas":[{"active":7000000000},{"active":9000000000}]}}`, false},
		{`{"cluster":{"leader":"n0","replicas":[{"active":1000000,"offline":true},{"active":9000000000}]}}`, false},
		{`{"cluster":{"leader":"n0"}}`, true},
		{`{}`, true},
	} {
		var a jsAPIAnswer
		if err := json.Unmarshal([]byte(tc.json), &a); err != nil {
			t.Fatal(err)
		}
		if got := a.quorate(); got != tc.ok {
			t.Errorf("%s: quorate %v, want %v", tc.json, got, tc.ok)
		}
	}
}
