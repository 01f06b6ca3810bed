package faulttest

import "testing"

// A node's /healthz answers JSON, whose '>' comes escaped: the stream it
// names must be found either way, or the leader is never asked to step
// down (as it never was before the escaped form was matched).
func TestStuckStreamIsFoundInHealthzBody(t *testing.T) {
	for _, body := range []string{
		`n0 /healthz: 503 Service Unavailable {"status":"unavailable","error":"JetStream stream '$G \u003e TOOLWIRE_CALLS' is not current: group node unhealthy"}`,
		`JetStream stream '$G > TOOLWIRE_CALLS' is not current`,
	} {
		m := stuckStream.FindStringSubmatch(body)
		if m == nil || m[1] != "TOOLWIRE_CALLS" {
			t.Errorf("stuckStream in %q: %q, want TOOLWIRE_CALLS", body, m)
		}
	}
	if m := stuckStream.FindStringSubmatch(`{"error":"JetStream is not current with the meta leader"}`); m != nil {
		t.Errorf("a node behind the meta leader names no stream: %q", m)
	}
}
