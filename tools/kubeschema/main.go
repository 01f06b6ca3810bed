// Command kubeschema writes JSON schemas of the Kubernetes API kinds, one
// file per kind in kubeconform's layout ("<kind>-<group>-<version>.json",
// "<kind>-<version>.json" for the core group), from the OpenAPI (Swagger
// 2.0) document in the k8s.io/kubernetes module: offline, from the module
// cache or proxy, with the module's checksum pinned.
//
//	go run . -module k8s.io/kubernetes@v1.35.4 -sum h1:... -out DIR
//
// The schemas are standalone (every $ref points into the file's own
// "definitions", which hold only what the kind reaches) and strict: an
// object with listed properties allows no others, so a misspelt or
// misplaced key fails. As in the API server, int-or-string fields take a
// string or an integer, quantities a string or a number, and an optional
// field may be null.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	module := flag.String("module", "", "the k8s.io/kubernetes module at a version, e.g. k8s.io/kubernetes@v1.35.4")
	sum := flag.String("sum", "", "the module's expected h1: checksum (go mod download -json shows it)")
	out := flag.String("out", "", "directory to write the schemas into (created)")
	flag.Parse()
	if err := run(*module, *sum, *out); err != nil {
		fmt.Fprintln(os.Stderr, "kubeschema:", err)
		os.Exit(1)
	}
}

func run(module, sum, out string) error {
	if module == "" || sum == "" || out == "" {
		return errors.New("-module, -sum and -out are required")
	}
	dir, err := download(module, sum)
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(filepath.Join(dir, "api", "openapi-spec", "swagger.json"))
	if err != nil {
		return err
	}
	var spec struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(doc, &spec); err != nil {
		return fmt.Errorf("swagger.json: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	defs := map[string]any{}
	for name, d := range spec.Definitions {
		defs[name] = convert(name, d)
	}
	n := 0
	for _, name := range slices.Sorted(maps.Keys(spec.Definitions)) {
		gvks, _ := spec.Definitions[name]["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			gvk := g.(map[string]any)
			group, version, kind := gvk["group"].(string), gvk["version"].(string), gvk["kind"].(string)
			if err := write(out, fileName(group, version, kind), standalone(name, defs)); err != nil {
				return err
			}
			n++
		}
	}
	fmt.Printf("kubeschema: %d schemas from %s in %s\n", n, module, out)
	return nil
}

// download finds the module in the module cache (fetching it through the
// module proxy if needed) and checks its checksum.
func download(module, sum string) (string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Stderr = &stderr
	cmd.Dir = os.TempDir() // outside any module: no go.mod is consulted
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %v: %s", module, err, stderr.Bytes())
	}
	var info struct{ Dir, Sum, Error string }
	if err := json.Unmarshal(b, &info); err != nil {
		return "", err
	}
	if info.Error != "" {
		return "", fmt.Errorf("go mod download %s: %s", module, info.Error)
	}
	if info.Sum != sum {
		return "", fmt.Errorf("%s has checksum %s, want %s", module, info.Sum, sum)
	}
	return info.Dir, nil
}

// fileName is kubeconform's name for a kind's schema.
func fileName(group, version, kind string) string {
	suffix := "-" + strings.ToLower(version)
	if group != "" {
		suffix = "-" + strings.ToLower(strings.Split(group, ".")[0]) + suffix
	}
	return strings.ToLower(kind) + suffix + ".json"
}

const refPrefix = "#/definitions/"

// standalone is the schema of definition name with the definitions it
// reaches.
func standalone(name string, defs map[string]any) map[string]any {
	reached := map[string]any{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if r, ok := v["$ref"].(string); ok {
				d := strings.TrimPrefix(r, refPrefix)
				if _, seen := reached[d]; !seen {
					reached[d] = defs[d]
					walk(defs[d])
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	root := maps.Clone(defs[name].(map[string]any))
	walk(root)
	root["$schema"] = "http://json-schema.org/draft-07/schema#"
	if len(reached) > 0 {
		root["definitions"] = reached
	}
	return root
}

// convert turns a Swagger definition into JSON Schema as the API server
// applies it: strict objects, optional fields nullable, int-or-string and
// quantities typed as they are accepted.
func convert(name string, d map[string]any) any {
	switch name {
	case "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
		return map[string]any{"type": []any{"string", "integer"}}
	case "io.k8s.apimachinery.pkg.api.resource.Quantity":
		return map[string]any{"type": []any{"string", "number"}}
	}
	return schema(d, false)
}

func schema(d map[string]any, nullable bool) map[string]any {
	s := map[string]any{}
	for k, v := range d {
		switch k {
		case "description", "x-kubernetes-group-version-kind", "x-kubernetes-map-type", "x-kubernetes-unions",
			"x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-patch-strategy", "x-kubernetes-patch-merge-key":
			// documentation and merge hints: not constraints
		case "format":
			if v == "int-or-string" {
				s["type"] = []any{"string", "integer"}
			}
		case "properties":
			props := map[string]any{}
			required := map[string]bool{}
			if r, ok := d["required"].([]any); ok {
				for _, x := range r {
					required[x.(string)] = true
				}
			}
			for p, ps := range v.(map[string]any) {
				props[p] = schema(ps.(map[string]any), !required[p])
			}
			s[k] = props
		case "items":
			s[k] = schema(v.(map[string]any), false)
		case "additionalProperties":
			if m, ok := v.(map[string]any); ok {
				s[k] = schema(m, false)
			} else {
				s[k] = v
			}
		default:
			s[k] = v
		}
	}
	if _, ok := s["properties"]; ok {
		if _, set := s["additionalProperties"]; !set {
			s["additionalProperties"] = false
		}
	}
	if t, ok := s["type"].(string); ok && nullable {
		s["type"] = []any{t, "null"}
	}
	return s
}

func write(dir, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), b, 0o644)
}
