package main

import (
	"reflect"
	"testing"
)

func TestFileNameIsKubeconforms(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ group, version, kind, want string }{
		{"", "v1", "Service", "service-v1.json"},
		{"apps", "v1", "Deployment", "deployment-apps-v1.json"},
		{"networking.k8s.io", "v1", "NetworkPolicy", "networkpolicy-networking-v1.json"},
		{"autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscaler-autoscaling-v2.json"},
	} {
		if got := fileName(c.group, c.version, c.kind); got != c.want {
			t.Errorf("fileName(%q, %q, %q) = %q, want %q", c.group, c.version, c.kind, got, c.want)
		}
	}
}

func TestSchemasAreStrictStandaloneAndAcceptWhatTheAPIServerAccepts(t *testing.T) {
	t.Parallel()
	swagger := map[string]map[string]any{
		"x.Thing": {"type": "object", "required": []any{"name"}, "properties": map[string]any{
			"name":  map[string]any{"type": "string", "description": "dropped"},
			"port":  map[string]any{"$ref": "#/definitions/io.k8s.apimachinery.pkg.util.intstr.IntOrString"},
			"cpu":   map[string]any{"$ref": "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"},
			"items": map[string]any{"type": "array", "items": map[string]any{"$ref": "#/definitions/x.Item"}},
		}},
		"x.Item":   {"type": "object", "properties": map[string]any{"labels": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}}}},
		"x.Unused": {"type": "object", "properties": map[string]any{}},
		"io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
		"io.k8s.apimachinery.pkg.api.resource.Quantity":   {"type": "string"},
	}
	defs := map[string]any{}
	for name, d := range swagger {
		defs[name] = convert(name, d)
	}
	s := standalone("x.Thing", defs)

	props := s["properties"].(map[string]any)
	if s["additionalProperties"] != false {
		t.Error("an object with properties must allow no others")
	}
	if got := props["name"]; !reflect.DeepEqual(got, map[string]any{"type": "string"}) {
		t.Errorf("required name = %v, want a plain string without description", got)
	}
	if got := props["items"].(map[string]any)["type"]; !reflect.DeepEqual(got, []any{"array", "null"}) {
		t.Errorf("optional items type = %v, want nullable", got)
	}
	reached := s["definitions"].(map[string]any)
	for _, want := range []string{"x.Item", "io.k8s.apimachinery.pkg.util.intstr.IntOrString", "io.k8s.apimachinery.pkg.api.resource.Quantity"} {
		if reached[want] == nil {
			t.Errorf("definitions lack %s", want)
		}
	}
	if reached["x.Unused"] != nil {
		t.Error("definitions hold an unreachable one")
	}
	if got := reached["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]; !reflect.DeepEqual(got, map[string]any{"type": []any{"string", "integer"}}) {
		t.Errorf("IntOrString = %v", got)
	}
	if got := reached["io.k8s.apimachinery.pkg.api.resource.Quantity"]; !reflect.DeepEqual(got, map[string]any{"type": []any{"string", "number"}}) {
		t.Errorf("Quantity = %v", got)
	}
	if got := reached["x.Item"].(map[string]any)["properties"].(map[string]any)["labels"].(map[string]any)["additionalProperties"]; !reflect.DeepEqual(got, map[string]any{"type": "string"}) {
		t.Errorf("map values = %v", got)
	}
}
