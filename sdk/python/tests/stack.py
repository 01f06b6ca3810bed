"""The stack the tests run against: sdk/python/sdk_test.go starts a real
dispatcher and worker and passes their address and API keys in the
environment. Without them the tests that need a stack are skipped (the Go
test fails on any skip)."""

import os
import unittest
import uuid

URL = os.environ.get("TOOLWIRE_URL", "")
API_KEY = os.environ.get("TOOLWIRE_API_KEY", "")
APPROVER_KEY = os.environ.get("TOOLWIRE_APPROVER_KEY", "")

needs_stack = unittest.skipUnless(URL and API_KEY and APPROVER_KEY,
                                  "TOOLWIRE_URL, TOOLWIRE_API_KEY and TOOLWIRE_APPROVER_KEY are not set "
                                  "(go test ./sdk/python/ runs these tests against a real stack)")


def unique(prefix: str) -> str:
    """A name no other test uses (sessions, idempotency keys)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"
