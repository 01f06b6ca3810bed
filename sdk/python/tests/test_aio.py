"""The asyncio client against the same real stack: the same answers as
the sync client (one protocol module serves both), concurrent calls on
one event loop, and an async watch."""

import asyncio
import unittest

import toolwire
from toolwire import AsyncClient

from .stack import API_KEY, APPROVER_KEY, URL, needs_stack, unique


@needs_stack
class AsyncScenarios(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.tw = AsyncClient(URL, api_key=API_KEY)
        self.approver = AsyncClient(URL, api_key=APPROVER_KEY)

    async def asyncTearDown(self):
        await self.tw.close()
        await self.approver.close()

    async def test_call_and_errors(self):
        res = await self.tw.call("echo", {"text": "hello"})
        self.assertEqual(res.text, "hello")
        bad = await self.tw.call("echo", {"text": 7})
        self.assertIsInstance(bad.error, toolwire.ValidationError)
        denied = await self.tw.call("echo", {"text": "secret"})
        self.assertIsInstance(denied.error, toolwire.PermissionDeniedError)
        with self.assertRaises(toolwire.UnknownCallError):
            await self.tw.get_result("01ARZ3NDEKTSV4RRFFQ69G5FAV")

    async def test_concurrent_calls_share_the_loop(self):
        texts = [f"t{i}" for i in range(40)]
        results = await asyncio.gather(*(self.tw.call("echo", {"text": t}) for t in texts))
        self.assertEqual([r.text for r in results], texts)
        self.assertEqual(len({r.call_id for r in results}), 40)

    async def test_watch_with_progress(self):
        sub = await self.tw.submit("steps", {"steps": 2})
        events = [ev async for ev in self.tw.watch(sub.call_id)]
        self.assertEqual([e.message for e in events if e.type == "PROGRESS"], ["step 1 of 2", "step 2 of 2"])
        self.assertEqual(events[-1].type, "FINISHED")
        self.assertEqual(events[-1].result.text, "did 2 steps")

    async def test_cancel_and_approve(self):
        sub = await self.tw.submit("hold", {})
        async for ev in self.tw.watch(sub.call_id):
            if ev.type == "PROGRESS":
                break
        self.assertEqual(await self.tw.cancel(sub.call_id), "REQUESTED")
        res = await self.tw.get_result(sub.call_id, wait=30)
        self.assertIsInstance(res.error, toolwire.CallCancelledError)

        session = unique("aio-ask")
        with self.assertRaises(toolwire.ApprovalRequiredError) as cm:
            await self.tw.call("deploy", {"name": "async"}, session=session)
        ok = await self.approver.approve(cm.exception.approval_id, scope="session")
        self.assertIsNotNone(ok.grant, "a session-scoped approval stores a grant")
        res = await self.tw.get_result(cm.exception.call_id, wait=30)
        self.assertEqual(res.text, "deployed async")
        # The grant covers the session's next deploy of the same tool.
        again = await self.tw.call("deploy", {"name": "async"}, session=session)
        self.assertTrue(again.ok, again.error)
        grants = await self.approver.list_grants(session=session)
        self.assertEqual([g.id for g in grants], [ok.grant.id])
        self.assertTrue(await self.approver.revoke_grant(ok.grant.id))

    async def test_sessions_and_tools(self):
        session = unique("aio-intents")
        res = await self.tw.call("remember", {"key": "k", "value": [1, 2]}, session=session, apply_intents=True)
        self.assertEqual(res.session.state, {"k": [1, 2]})
        self.assertEqual((await self.tw.get_session(session)).state, {"k": [1, 2]})
        tools = await self.tw.list_tools("echo")
        self.assertEqual([t.name for t in tools], ["echo"])
        mcp = await self.tw.export_tools("mcp", "echo")
        self.assertEqual(mcp["tools"][0]["name"], "echo")
        usage = await self.tw.usage()
        self.assertIn("ping-rate", [u.limit for u in usage.limits])

    async def test_bad_key(self):
        async with AsyncClient(URL, api_key="nope") as bad:
            with self.assertRaises(toolwire.TransportError) as cm:
                await bad.list_tools()
        self.assertEqual(cm.exception.code, "unauthenticated")


if __name__ == "__main__":
    unittest.main()
