package poolview

import (
	"testing"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/maintenance"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Admission's pool check costs a served call a map lookup: no allocation.
func TestPoolViewCoversWithoutAllocating(t *testing.T) {
	subj := bus.Subjects{Prefix: "toolwire"}
	native := toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	v := &poolView{cov: maintenance.NewCoverage(
		subj.ToolSubject(native, "builtin", "echo"),
		subj.CallsOfType(toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP),
	), tools: map[ToolKey]bool{}}
	echo := ToolKey{native, "builtin", "echo"}
	for _, c := range []struct {
		k      ToolKey
		tenant string
		want   bool
	}{
		{echo, "acme", true},
		{echo, "other", true},
		{ToolKey{native, "builtin", "sleep"}, "acme", false},
		{ToolKey{toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP, "local", "fetch"}, "acme", true},
		{ToolKey{toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX, "local", "grep"}, "acme", false},
	} {
		if got := v.covers(subj, c.k, c.tenant); got != c.want {
			t.Errorf("covers(%v, %s) = %v, want %v", c.k, c.tenant, got, c.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { v.covers(subj, echo, "acme") }); n != 0 {
		t.Fatalf("a covered call allocates %v times", n)
	}

	// A filter naming a tenant (not one a worker makes) is answered per
	// tenant.
	v = &poolView{cov: maintenance.NewCoverage("toolwire.call.native.acme.>"), tools: map[ToolKey]bool{}}
	if !v.covers(subj, echo, "acme") || v.covers(subj, echo, "other") {
		t.Fatal("a tenant's own filter is not answered per tenant")
	}
}

func BenchmarkPoolViewCovers(b *testing.B) {
	subj := bus.Subjects{Prefix: "toolwire"}
	native := toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	v := &poolView{cov: maintenance.NewCoverage(subj.ToolSubject(native, "builtin", "echo")), tools: map[ToolKey]bool{}}
	echo := ToolKey{native, "builtin", "echo"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !v.covers(subj, echo, "acme") {
				b.Fatal("not covered")
			}
		}
	})
}
