// The stack the tests run against: sdk/typescript/sdk_test.go starts a
// real dispatcher and worker (internal/sdkstack) and passes their address
// and API keys in the environment. Without them the tests that need a
// stack are skipped (the Go test fails on any skip).
import { randomUUID } from "node:crypto";

export const URL = process.env.TOOLWIRE_URL ?? "";
export const API_KEY = process.env.TOOLWIRE_API_KEY ?? "";
export const APPROVER_KEY = process.env.TOOLWIRE_APPROVER_KEY ?? "";

/** node:test's skip option: a reason when there is no stack. */
export const needsStack = URL && API_KEY && APPROVER_KEY ? false
  : "TOOLWIRE_URL, TOOLWIRE_API_KEY and TOOLWIRE_APPROVER_KEY are not set (go test ./sdk/typescript/ runs these tests against a real stack)";

/** A name no other test uses (sessions, idempotency keys). */
export function unique(prefix) {
  return `${prefix}-${randomUUID().slice(0, 12)}`;
}
