package toolworker_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolwire/toolwire/internal/signing"
	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"
)

// testKeyFile is the signing key the tests' workers sign with
// (TOOLWIRE_SIGNING_KEY, so MainArgs finds it; Options.SigningKey for
// Run), and testTrust the dispatchers' trust of it for every pool.
var (
	testKeyFile string
	testTrust   *signing.Trust
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "toolworker-keys")
	if err == nil {
		testKeyFile = filepath.Join(dir, signing.LocalWorkerKey)
		if _, err = signing.KeyFile(testKeyFile); err == nil {
			testTrust, err = signing.NewTrust(dir)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker keys:", err)
		os.Exit(2)
	}
	os.Setenv("TOOLWIRE_SIGNING_KEY", testKeyFile) //nolint:errcheck // read by MainArgs' flags
	defer os.RemoveAll(dir)
	goleak.VerifyTestMain(m, testdeps.IgnoreNATS())
}
