package bus

import "testing"

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
