package dispatchd

import (
	"testing"

	"github.com/toolwire/toolwire/internal/specfile"
)

// TestSpecsLoad: every example spec file is valid.
func TestSpecsLoad(t *testing.T) {
	t.Parallel()
	specs, err := specfile.LoadDir(defaultSpecs, defaultSpecDir, specfile.Options{Vars: map[string]string{
		"TOOLWIRE_HTTP": "http://127.0.0.1:8080", "TOOLWIRE_HTTP_PORT": "8080"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 3 {
		t.Fatalf("want 3 example specs, got %d", len(specs))
	}
	for _, s := range specs {
		if got := s.GetHttp().GetAllowPorts(); s.GetHttp() != nil && (len(got) != 1 || got[0] != 8080) {
			t.Errorf("%s: allow_ports %v", s.Name, got)
		}
	}
}
