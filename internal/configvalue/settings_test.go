package configvalue_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/configvalue"
)

func TestDuration(t *testing.T) {
	var d configvalue.Duration
	if err := json.Unmarshal([]byte(`"1m30s"`), &d); err != nil || time.Duration(d) != 90*time.Second {
		t.Fatalf("%v %v", d, err)
	}
	for _, bad := range []string{`30`, `"thirty"`, `null1`} {
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	if b, _ := json.Marshal(configvalue.Duration(2 * time.Second)); string(b) != `"2s"` {
		t.Fatalf("marshal: %s", b)
	}
}

func TestSecrets(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("s3cr3t-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TW_SETTINGS_SECRET", "from-env")
	for ref, want := range map[string]string{"env:TW_SETTINGS_SECRET": "from-env", "file:" + file: "s3cr3t-value"} {
		if got, err := configvalue.ResolveSecret(ref); err != nil || got != want {
			t.Errorf("%s = %q, %v", ref, got, err)
		}
	}
	if err := os.WriteFile(file, []byte("two\nlines"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"env:TW_SETTINGS_UNSET", "file:" + file, "file:relative", "vault:x", "env:1X", "file:" + dir + "/../x"} {
		_, err := configvalue.ResolveSecret(ref)
		if err == nil {
			t.Errorf("%s resolved", ref)
		} else if strings.Contains(err.Error(), "lines") && strings.Contains(err.Error(), "two") {
			t.Errorf("%s: the error shows the value: %v", ref, err)
		}
	}
}
