"""The sync client against a real dispatcher and worker: the scenarios of
issue 34 (call, validation error, policy deny, ask -> approve -> run,
token redeem, watch with progress, cancel reaching the worker, intents
applied to a session, a rate limit's retry_after)."""

import unittest

import toolwire
from toolwire import Client

from .stack import API_KEY, APPROVER_KEY, URL, needs_stack, unique


@needs_stack
class ClientScenarios(unittest.TestCase):
    def setUp(self):
        self.tw = Client(URL, api_key=API_KEY)
        self.approver = Client(URL, api_key=APPROVER_KEY)
        self.addCleanup(self.tw.close)
        self.addCleanup(self.approver.close)

    def test_call(self):
        res = self.tw.call("echo", {"text": "hello"})
        self.assertTrue(res.ok)
        self.assertIsNone(res.error)
        self.assertEqual(res.text, "hello")
        self.assertEqual(res.structured, {"text": "hello"})
        self.assertEqual(res.tool, "echo")
        self.assertEqual(res.meta.source, "worker")
        self.assertTrue(res.meta.spec_version)
        self.assertIs(res.raise_for_error(), res)

    def test_arguments_as_json_text_reach_the_tool_byte_for_byte(self):
        res = self.tw.call("echo", '{"text": "12345678901234567890123"}')
        self.assertEqual(res.text, "12345678901234567890123")

    def test_validation_error(self):
        res = self.tw.call("echo", {"text": 7})
        self.assertFalse(res.ok)
        self.assertIsInstance(res.error, toolwire.ValidationError)
        self.assertEqual(res.error.type, "VALIDATION")
        self.assertFalse(res.error.retryable)
        self.assertEqual(res.error.side_effects, "NONE")
        self.assertIsNone(res.error.retry_after)
        self.assertIn("/text", [v.field for v in res.error.violations])
        self.assertEqual(res.error.call_id, res.call_id)
        with self.assertRaises(toolwire.ValidationError):
            res.raise_for_error()

    def test_unknown_tool_is_not_found(self):
        res = self.tw.call("no_such_tool", {})
        self.assertIsInstance(res.error, toolwire.NotFoundError)

    def test_policy_deny(self):
        res = self.tw.call("echo", {"text": "secret plans"})
        self.assertIsInstance(res.error, toolwire.PermissionDeniedError)
        self.assertIn("secrets are never echoed", res.error.message)
        self.assertFalse(res.error.retryable)
        self.assertEqual(res.error.side_effects, "NONE")

    def test_ask_approve_run(self):
        session = unique("ask")
        with self.assertRaises(toolwire.ApprovalRequiredError) as cm:
            self.tw.call("deploy", {"name": "billing"}, session=session)
        parked = cm.exception
        self.assertIsInstance(parked, toolwire.ConfirmationRequiredError)
        self.assertEqual(parked.approval_id, parked.call_id)
        self.assertIsNotNone(parked.expires_at)

        pending = self.approver.list_approvals("pending", session=session)
        self.assertEqual([a.id for a in pending], [parked.approval_id])
        self.assertEqual(pending[0].tool, "deploy")
        self.assertEqual(pending[0].arguments, {"name": "billing"})
        done = self.approver.approve(parked.approval_id, reason="looks fine")
        self.assertEqual(done.approval.state, "APPROVED")
        self.assertIsNone(done.grant)

        res = self.tw.get_result(parked.call_id, wait=30)
        self.assertTrue(res.ok, res.error)
        self.assertEqual(res.text, "deployed billing")

    def test_ask_deny(self):
        sub = self.tw.submit("deploy", {"name": "payroll"}, session=unique("deny"))
        self.assertIsNotNone(sub.approval)
        self.assertEqual(sub.state, "AWAITING_APPROVAL")
        denied = self.approver.deny(sub.approval.approval_id, "not on a Friday")
        self.assertEqual(denied.state, "DENIED")
        res = self.tw.get_result(sub.call_id, wait=30)
        self.assertIsInstance(res.error, toolwire.PermissionDeniedError)
        self.assertIn("not on a Friday", res.error.message)

    def test_token_redeem(self):
        session = unique("token")
        with self.assertRaises(toolwire.ApprovalRequiredError) as cm:
            self.tw.call("deploy", {"name": "search"}, session=session)
        token = cm.exception.token
        self.assertTrue(token, "the agent's key has the confirm scope and the dispatcher token keys")
        # The orchestrator's own user confirmed: the same call, with the token.
        res = self.tw.call("deploy", '{ "name" : "search" }', session=session, approval_token=token)
        self.assertTrue(res.ok, res.error)
        self.assertEqual(res.text, "deployed search")
        self.assertEqual(res.call_id, cm.exception.call_id, "it runs as the parked call")
        # Used once.
        again = self.tw.call("deploy", {"name": "search"}, session=session, approval_token=token)
        self.assertIsInstance(again.error, toolwire.ConfirmationRequiredError)

    def test_watch_with_progress(self):
        sub = self.tw.submit("steps", {"steps": 3})
        events = list(self.tw.watch(sub.call_id))
        progress = [e for e in events if e.type == "PROGRESS"]
        self.assertEqual([e.message for e in progress], ["step 1 of 3", "step 2 of 3", "step 3 of 3"])
        self.assertEqual([e.percent for e in progress], [33.0, 66.0, 100.0])
        self.assertIn("STARTED", [e.type for e in events])
        last = events[-1]
        self.assertEqual(last.type, "FINISHED")
        self.assertTrue(last.terminal)
        self.assertEqual(last.result.text, "did 3 steps")

        # Resumed after the events already seen: only the rest comes.
        seen = events[:-2]
        rest = list(self.tw.watch(sub.call_id, after=seen))
        self.assertEqual([(e.type, e.message) for e in rest], [("PROGRESS", "step 3 of 3"), ("FINISHED", "")])

    def test_watch_of_a_rejected_call(self):
        sub = self.tw.submit("echo", {"text": 7})
        self.assertIsInstance(sub.result.error, toolwire.ValidationError)
        events = list(self.tw.watch(sub.call_id))
        self.assertEqual(events[-1].type, "REJECTED")
        self.assertIsInstance(events[-1].result.error, toolwire.ValidationError)

    def test_cancel_reaches_the_worker(self):
        sub = self.tw.submit("hold", {})
        for ev in self.tw.watch(sub.call_id):
            if ev.type == "PROGRESS" and ev.message == "holding":
                break  # running on the worker: cancel it there
        self.assertEqual(self.tw.cancel(sub.call_id, "changed my mind"), "REQUESTED")
        res = self.tw.get_result(sub.call_id, wait=30)
        self.assertIsInstance(res.error, toolwire.CallCancelledError)
        self.assertEqual(res.meta.source, "worker")
        self.assertEqual(res.meta.cancel_reason, "changed my mind")
        self.assertEqual(self.tw.cancel(sub.call_id), "ALREADY_FINISHED")

    def test_pending_then_cancelled_before_it_ends(self):
        with self.assertRaises(toolwire.PendingError) as cm:
            self.tw.call("sleep", {"duration": "1h"}, wait=0.2)
        call_id = cm.exception.call_id
        self.assertEqual(self.tw.cancel(call_id), "REQUESTED")
        res = self.tw.get_result(call_id, wait=30)
        self.assertIsInstance(res.error, toolwire.CallCancelledError)

    def test_intents_applied_to_a_session(self):
        session = unique("intents")
        res = self.tw.call("remember", {"key": "color", "value": "blue"}, session=session, apply_intents=True)
        self.assertTrue(res.ok, res.error)
        self.assertEqual([i.type for i in res.intents], ["SET_STATE"])
        self.assertEqual(res.intents[0].payload, {"key": "color", "value": "blue"})
        self.assertEqual(res.session.state, {"color": "blue"})
        self.assertEqual(res.apply_error, "")
        again = self.tw.apply_intents(res.call_id)
        self.assertEqual((again.applied, again.skipped), (0, 1), "each intent is applied once")
        s = self.tw.get_session(session)
        self.assertEqual(s.state, {"color": "blue"})
        self.assertGreaterEqual(s.revision, 1)

    def test_intents_applied_later(self):
        session = unique("later")
        res = self.tw.call("remember", {"key": "n", "value": 42}, session=session)
        self.assertIsNone(res.session)
        applied = self.tw.apply_intents(res.call_id)
        self.assertEqual(applied.applied, 1)
        self.assertEqual(applied.session.state, {"n": 42})

    def test_rate_limit_retry_after(self):
        first = self.tw.call("ping", {})
        self.assertTrue(first.ok, first.error)
        second = self.tw.call("ping", {})
        self.assertIsInstance(second.error, toolwire.RateLimitError)
        self.assertTrue(second.error.retryable)
        self.assertGreater(second.error.retry_after, 60.0, "one ping an hour: the next is due in about an hour")
        self.assertLessEqual(second.error.retry_after, 3600.0)
        self.assertIn("ping-rate", second.error.message)
        usage = self.tw.usage()
        limit = next(u for u in usage.limits if u.limit == "ping-rate")
        self.assertEqual((limit.rate_count, limit.rate_per, limit.key), (1, 3600.0, "agent"))
        self.assertTrue(usage.policy_version)

    def test_tools_and_exports(self):
        names = [t.name for t in self.tw.list_tools()]
        for name in ("echo", "sleep", "steps", "hold", "deploy", "ping", "remember"):
            self.assertIn(name, names)
        echo = self.tw.get_tool("echo")
        self.assertEqual(echo.input_schema["properties"]["text"]["type"], "string")
        self.assertTrue(echo.version)
        self.assertEqual(echo.executor, "NATIVE")
        self.assertEqual([t.name for t in self.tw.list_tools("ec*")], ["echo"])
        openai = self.tw.export_tools("openai", "echo")
        self.assertEqual(openai[0]["function"]["name"], "echo")
        anthropic = self.tw.export_tools("anthropic", "echo")
        self.assertEqual(anthropic[0]["name"], "echo")
        self.assertIn("input_schema", anthropic[0])

    def test_unknown_call(self):
        with self.assertRaises(toolwire.UnknownCallError):
            self.tw.get_result("01ARZ3NDEKTSV4RRFFQ69G5FAV")
        with self.assertRaises(toolwire.UnknownCallError):
            list(self.tw.watch("01ARZ3NDEKTSV4RRFFQ69G5FAV"))
        self.assertEqual(self.tw.cancel("01ARZ3NDEKTSV4RRFFQ69G5FAV"), "UNKNOWN_CALL")

    def test_bad_key_is_a_transport_error(self):
        with Client(URL, api_key="not-a-key") as bad:
            with self.assertRaises(toolwire.TransportError) as cm:
                bad.call("echo", {"text": "x"})
        self.assertEqual(cm.exception.code, "unauthenticated")
        self.assertEqual(cm.exception.http_status, 401)

    def test_approvals_need_the_approve_scope(self):
        with self.assertRaises(toolwire.TransportError) as cm:
            self.tw.list_approvals()
        self.assertEqual(cm.exception.code, "permission_denied")

    def test_unreachable_dispatcher(self):
        with Client("http://127.0.0.1:1", timeout=5) as nowhere:
            with self.assertRaises(toolwire.TransportError) as cm:
                nowhere.list_tools()
        self.assertEqual(cm.exception.code, "unavailable")

    def test_idempotency_key(self):
        key = unique("idem")
        a = self.tw.call("echo", {"text": "once"}, idempotency_key=key)
        b = self.tw.submit("echo", {"text": "once"}, idempotency_key=key)
        self.assertTrue(b.duplicate)
        self.assertEqual(a.call_id, b.call_id)
        c = self.tw.call("echo", {"text": "other"}, idempotency_key=key)
        self.assertIsInstance(c.error, toolwire.ConflictError)


if __name__ == "__main__":
    unittest.main()
