package audit_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/audit"
)

func TestExportVerify(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "export")
	e, err := audit.NewExporter(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range []string{audit.OutcomeOK, audit.OutcomeOK, audit.OutcomeCancelled} {
		if err := e.Write(&audit.Record{CallID: string(rune('a' + i)), Time: time.Unix(0, 0).UTC(), Outcome: o, Admission: "accepted"}); err != nil {
			t.Fatal(err)
		}
	}
	m, err := e.Close(audit.Filter{Tenant: "acme"}, &audit.Summary{FirstSeq: 1, LastSeq: 3})
	if err != nil {
		t.Fatal(err)
	}
	if m.Records != 3 || m.Outcomes[audit.OutcomeOK] != 2 || len(m.SHA256) != 64 {
		t.Fatalf("manifest %+v", m)
	}
	if _, err := audit.VerifyExport(dir); err != nil {
		t.Fatalf("a fresh export does not verify: %v", err)
	}
	if _, err := audit.NewExporter(dir); err == nil {
		t.Fatal("exported into a non-empty directory")
	}

	// Any change to the records is caught.
	records := filepath.Join(dir, audit.RecordsFile)
	b, _ := os.ReadFile(records)
	tampered := strings.Replace(string(b), `"outcome":"cancelled"`, `"outcome":"ok"`, 1)
	if err := os.WriteFile(records, []byte(tampered), 0o640); err != nil {
		t.Fatal(err)
	}
	_, err = audit.VerifyExport(dir)
	if !errors.Is(err, audit.ErrExportMismatch) || !strings.Contains(err.Error(), "SHA-256") || !strings.Contains(err.Error(), "outcomes") {
		t.Fatalf("tampered export: %v", err)
	}
	// A dropped line too.
	lines := strings.SplitAfter(string(b), "\n")
	if err := os.WriteFile(records, []byte(strings.Join(lines[1:], "")), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := audit.VerifyExport(dir); err == nil || !strings.Contains(err.Error(), "2 records, manifest says 3") {
		t.Fatalf("dropped record: %v", err)
	}
}
