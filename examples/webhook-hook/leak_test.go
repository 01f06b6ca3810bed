package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/toolwire/toolwire/internal/testdeps"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testdeps.IgnoreNATS()) }
