package faulttest_test

import (
	"os"
	"testing"

	"github.com/toolwire/toolwire/internal/faulttest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	faulttest.Cleanup()
	os.Exit(code)
}
