package workerconfig_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/toolwire/toolwire/internal/specfile"
	"github.com/toolwire/toolwire/internal/workerconfig"
	"sigs.k8s.io/yaml"
)

// The Helm chart's example values (deploy/helm/toolwire/ci) put worker
// configurations and spec files in ConfigMaps: each must load as the worker
// would load it, so the examples cannot drift from the format.
func TestChartExamplesLoad(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../deploy/helm/toolwire/ci/*-values.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no chart values files: %v", err)
	}
	type pool struct {
		Name   string            `json:"name"`
		Config map[string]any    `json:"config"`
		Specs  map[string]string `json:"specs"`
	}
	checked := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var values struct {
			Pools []pool `json:"pools"`
		}
		if err := yaml.Unmarshal(b, &values); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, p := range values.Pools {
			if p.Config == nil && p.Specs == nil {
				continue
			}
			t.Run(filepath.Base(file)+"/"+p.Name, func(t *testing.T) {
				// As the chart's poolConfig template writes it.
				dir := t.TempDir()
				cfg := map[string]any{}
				for k, v := range p.Config {
					cfg[k] = v
				}
				if _, ok := cfg["tools"]; !ok && len(p.Specs) > 0 {
					cfg["tools"] = []string{"specs"}
				}
				writeYAML(t, filepath.Join(dir, "worker.yaml"), cfg)
				if err := os.Mkdir(filepath.Join(dir, "specs"), 0o755); err != nil {
					t.Fatal(err)
				}
				for name, content := range p.Specs {
					if err := os.WriteFile(filepath.Join(dir, "specs", name), []byte(content), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := workerconfig.Load(filepath.Join(dir, "worker.yaml")); err != nil {
					t.Fatalf("worker.yaml: %v", err)
				}
				specs, err := specfile.LoadDir(os.DirFS(filepath.Join(dir, "specs")), ".", specfile.Options{
					Lookup: func(string) (string, bool) { return "", false }})
				if err != nil {
					t.Fatalf("specs: %v", err)
				}
				if len(specs) != len(p.Specs) {
					t.Fatalf("loaded %d specs of %d", len(specs), len(p.Specs))
				}
			})
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no pool with a configuration in the chart's examples")
	}
}

func writeYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
