"""The transport against fake servers (tests/fake.py) that break or lie:
what is sent again, what is bounded, what never shows in an error, and
that every failure is a TransportError with its connection closed. The
same scenarios for the sync and the asyncio client."""

import asyncio
import json
import select
import threading
import time
import unittest

import toolwire
from toolwire import _protocol as p

from .fake import STALL, FakeServer, http_answer, json_answer, stream_answer

DONE = {"callId": "c1", "state": "CALL_STATE_DONE", "response": {"ok": True}}
SUBMITTED = {"callId": "c1", "state": "CALL_STATE_PENDING"}


def run(coro, limit=30):
    """Run a coroutine, failing (not hanging) when it takes over limit seconds."""
    return asyncio.run(asyncio.wait_for(coro, limit))


def first_answered_then_closed(conn_no, req_no, head, body):
    """Answers the first request of a connection; reads the second whole and
    closes without answering (the server may have run it)."""
    if req_no == 0:
        return json_answer(SUBMITTED if b"/Submit " in head else DONE)
    return None


class Server(unittest.TestCase):
    def serve(self, answer):
        s = FakeServer(answer)
        self.addCleanup(s.close)
        return s


class Resend(Server):
    def test_submit_without_idempotency_key_is_never_sent_twice(self):
        s = self.serve(first_answered_then_closed)
        with toolwire.Client(s.url, timeout=10) as tw:
            tw.submit("charge_card", {"amount": 1})
            with self.assertRaises(toolwire.TransportError) as cm:
                tw.submit("charge_card", {"amount": 1})
        self.assertIn("may have been run", str(cm.exception))
        self.assertEqual(len(s.heads("Submit")), 2)

    def test_aio_submit_without_idempotency_key_is_never_sent_twice(self):
        s = self.serve(first_answered_then_closed)

        async def main():
            async with toolwire.AsyncClient(s.url, timeout=10) as tw:
                await tw.submit("charge_card", {"amount": 1})
                with self.assertRaises(toolwire.TransportError):
                    await tw.submit("charge_card", {"amount": 1})
        run(main())
        self.assertEqual(len(s.heads("Submit")), 2)

    def test_repeatable_requests_are_sent_again_on_a_new_connection(self):
        s = self.serve(first_answered_then_closed)
        with toolwire.Client(s.url, timeout=10) as tw:
            tw.submit("charge_card", {"amount": 1}, idempotency_key="k1")
            self.assertEqual(tw.submit("charge_card", {"amount": 1}, idempotency_key="k1").call_id, "c1")
            self.assertEqual(tw.get_result("c1").call_id, "c1")

        async def main():
            async with toolwire.AsyncClient(s.url, timeout=10) as tw:
                await tw.submit("charge_card", {}, idempotency_key="k2")
                self.assertEqual((await tw.submit("charge_card", {}, idempotency_key="k2")).call_id, "c1")
        run(main())
        self.assertEqual(len(s.heads("Submit")), 6)

    def test_idle_connections_closed_by_the_server_are_not_used(self):
        both = threading.Barrier(2, timeout=20)

        def answer(conn_no, req_no, head, body):
            if conn_no < 2:
                both.wait()  # two requests in flight at once: two connections in the pool
            return json_answer(SUBMITTED if b"/Submit " in head else {"tools": []})
        s = self.serve(answer)
        with toolwire.Client(s.url, timeout=10) as tw:
            ts = [threading.Thread(target=tw.list_tools) for _ in range(2)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            self.assertEqual(len(tw._pool.idle), 2)
            s.close_all()  # a dispatcher restart closes its idle connections
            socks = [c.sock for c, _ in tw._pool.idle]
            deadline = time.monotonic() + 20
            while not all(select.select([x], [], [], 0)[0] for x in socks) and time.monotonic() < deadline:
                select.select(socks, [], [], 0.05)
            self.assertEqual(tw.submit("charge_card", {}).call_id, "c1")
        self.assertEqual(len(s.heads("Submit")), 1)


class Secrets(unittest.TestCase):
    def test_a_key_a_header_cannot_carry_is_refused_without_showing_it(self):
        for key in ("sk-secret-123\n", "sk-secret-123\r\nX-Injected: 1", "sk-secret 123", "sk-secret-\u00e9"):
            for cls in (toolwire.Client, toolwire.AsyncClient):
                with self.assertRaises(ValueError) as cm:
                    cls("http://127.0.0.1:1", key)
                self.assertNotIn("secret", str(cm.exception))
        toolwire.Client("http://127.0.0.1:1", "sk-ok_123.~").close()


class Bounds(Server):
    def test_a_status_line_without_a_reason_is_read(self):
        body = b'{"tools": []}'
        answer = b"HTTP/1.1 200\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        s = self.serve(lambda *a: answer)
        with toolwire.Client(s.url, timeout=10) as tw:
            self.assertEqual(tw.list_tools(), [])

        async def main():
            async with toolwire.AsyncClient(s.url, timeout=10) as tw:
                self.assertEqual(await tw.list_tools(), [])
        run(main())

    def test_aio_refuses_a_head_of_too_many_lines(self):
        many = b"".join(b"X-%d: a\r\n" % i for i in range(101))
        s = self.serve(lambda *a: http_answer(b"{}", extra=many))

        async def main():
            async with toolwire.AsyncClient(s.url, timeout=10) as tw:
                with self.assertRaises(toolwire.TransportError) as cm:
                    await tw.list_tools()
                self.assertIn("100 lines", str(cm.exception))
                self.assertEqual(tw._pool.open, 0)
        run(main())

    def test_aio_refuses_too_many_trailers(self):
        trailers = b"".join(b"X-%d: a\r\n" % i for i in range(101))
        chunked = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                   b"2\r\n{}\r\n0\r\n" + trailers + b"\r\n")
        s = self.serve(lambda *a: chunked)

        async def main():
            async with toolwire.AsyncClient(s.url, timeout=10) as tw:
                with self.assertRaises(toolwire.TransportError):
                    await tw.list_tools()
        run(main())

    def test_connections_given_back_after_close_are_closed(self):
        go = threading.Event()
        s = self.serve(lambda *a: (go.wait(20), json_answer({"tools": []}))[1])
        tw = toolwire.Client(s.url, timeout=20)
        t = threading.Thread(target=tw.list_tools)
        t.start()
        deadline = time.monotonic() + 20
        while not s.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        tw.close()
        go.set()
        t.join()
        self.assertEqual((tw._pool.idle, tw._pool.open), ([], 0))
        with self.assertRaises(toolwire.TransportError):
            tw.list_tools()

    def test_open_connections_are_capped(self):
        s = self.serve(lambda conn_no, *a: STALL if conn_no == 0 else json_answer({"tools": []}))
        # The stalled request holds the only connection far longer than the
        # second request's 0.2 s wait for one, however slow the machine.
        with toolwire.Client(s.url, timeout=20, max_conns=1) as tw:
            stalled = threading.Thread(target=lambda: self.assertRaises(toolwire.TransportError, tw.list_tools))
            stalled.start()
            deadline = time.monotonic() + 20
            while not s.requests and time.monotonic() < deadline:
                time.sleep(0.01)
            with self.assertRaises(toolwire.TransportError) as cm:
                tw.list_tools(timeout=0.2)
            s.close_all()  # ends the stalled request (a fresh connection: not sent again)
            stalled.join()
        self.assertEqual(cm.exception.code, "resource_exhausted")
        self.assertEqual(len(s.conns), 1)

    def test_bad_local_values_are_value_errors(self):
        with self.assertRaises(ValueError):
            toolwire.types.duration_json(float("inf"))
        with self.assertRaises(ValueError):
            p.encode_args(b"\xff{}")

    def test_resume_state_keeps_hashes(self):
        r = p.Resume()
        ev = toolwire.CallEvent(call_id="c", type="PROGRESS", message="x" * 100000,
                                raw={"type": "PROGRESS", "message": "x" * 100000})
        r.mark(ev)
        self.assertFalse(r.fresh(ev))
        self.assertEqual([len(k) for k in r.seen], [32])


class Watch(Server):
    def test_watch_sends_no_connect_deadline(self):
        s = self.serve(lambda *a: stream_answer((2, b"{}")))
        with toolwire.Client(s.url) as tw:
            with self.assertRaises(toolwire.WatchEndedError):
                list(tw.watch("c1", idle_timeout=30, resume=0))

        async def main():
            async with toolwire.AsyncClient(s.url) as tw:
                with self.assertRaises(toolwire.WatchEndedError):
                    async for _ in tw.watch("c1", idle_timeout=30, resume=0):
                        pass
        run(main())
        heads = s.heads("Watch")
        self.assertEqual(len(heads), 2)
        for h in heads:
            self.assertNotIn(b"connect-timeout-ms", h.lower())

    def test_leaving_a_watch_early_closes_its_stream(self):
        ev = b'{"event":{"callId":"c1","type":"CALL_EVENT_TYPE_PROGRESS","message":"half"}}'
        s = self.serve(lambda *a: (stream_answer((0, ev)), STALL))
        with toolwire.Client(s.url) as tw:
            events = tw.watch("c1")
            self.assertEqual(next(events).message, "half")
            events.close()
            self.assertEqual(tw._pool.open, 0)

        async def main():
            async with toolwire.AsyncClient(s.url) as tw:
                events = tw.watch("c1")
                self.assertEqual((await events.__anext__()).message, "half")
                await events.aclose()
                self.assertEqual(tw._pool.open, 0)
        run(main())

    def test_aio_watch_idle_timeout_covers_the_answer_head(self):
        s = self.serve(lambda *a: STALL)

        async def main():
            async with toolwire.AsyncClient(s.url) as tw:
                with self.assertRaises(toolwire.WatchEndedError) as cm:
                    async for _ in tw.watch("c1", idle_timeout=0.5, resume=0):
                        pass
                self.assertEqual(cm.exception.cause.code, "deadline_exceeded")
        run(main())


class Waits(Server):
    def test_get_result_fits_its_wait_inside_the_timeout(self):
        s = self.serve(lambda *a: json_answer({"callId": "c1", "state": "CALL_STATE_PENDING"}))
        with toolwire.Client(s.url) as tw:
            with self.assertRaises(toolwire.PendingError):
                tw.get_result("c1", wait=30, timeout=5)

        async def main():
            async with toolwire.AsyncClient(s.url) as tw:
                with self.assertRaises(toolwire.PendingError):
                    await tw.get_result("c1", wait=30, timeout=5)
        run(main())
        for _, body in s.requests:
            self.assertLess(toolwire.types.duration(json.loads(body)["wait"]), 5)


MALFORMED = [
    http_answer(b'{"callId":"c1","state":"CALL_STATE_DONE","response":{"content":"x"}}'),
    http_answer(b'{"callId":"c1","state":"CALL_STATE_DONE","response":{"content":[{"image":{"data":"A"}}]}}'),
    http_answer(b'{"callId":"c1","state":"CALL_STATE_DONE","response":{"meta":{"duration":"'
                + b"1" * 5000 + b's"}}}'),
    http_answer(b'{"callId":"c1","state":"CALL_STATE_DONE","response":{"error":"x"}}'),
    http_answer(b"[" * 100000 + b"]" * 100000),
    http_answer(b'{"code":"internal","details":"x"}', status="500 Internal"),
    b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n{}",
    b"HTTP/1.1 abc OK\r\n\r\n",
]


class Malformed(Server):
    def test_every_malformed_answer_is_a_transport_error(self):
        for answer in MALFORMED:
            s = self.serve(lambda *a, answer=answer: answer)
            with self.subTest(answer=answer[:90]):
                with toolwire.Client(s.url, timeout=10) as tw:
                    with self.assertRaises(toolwire.TransportError):
                        tw.get_result("c1")
                    self.assertEqual(tw._pool.open, 0)

                async def main():
                    async with toolwire.AsyncClient(s.url, timeout=10) as tw:
                        with self.assertRaises(toolwire.TransportError):
                            await tw.get_result("c1")
                        self.assertEqual(tw._pool.open, 0)
                run(main())

    def test_malformed_stream_messages_end_the_watch(self):
        for frames in ([(2, b'{"error":"x"}')], [(0, b'"x"')], [(0, b'{"event":{"partial":"x"}}')],
                       [(0, b'{"event":{"type":"CALL_EVENT_TYPE_PROGRESS","retryDelay":"' + b"9" * 5000 + b's"}}')]):
            s = self.serve(lambda *a, frames=frames: stream_answer(*frames))
            with self.subTest(frames=frames[0][1][:60]):
                with toolwire.Client(s.url) as tw:
                    with self.assertRaises(toolwire.WatchEndedError) as cm:
                        list(tw.watch("c1", resume=0))
                    self.assertIsInstance(cm.exception.cause, toolwire.TransportError)

                async def main():
                    async with toolwire.AsyncClient(s.url) as tw:
                        with self.assertRaises(toolwire.WatchEndedError):
                            async for _ in tw.watch("c1", resume=0):
                                pass
                run(main())

    def test_http_codes_follow_connect(self):
        for status, code in ((400, "internal"), (401, "unauthenticated"), (404, "unimplemented"),
                             (409, "unknown"), (429, "unavailable"), (503, "unavailable"), (413, "unknown")):
            self.assertEqual(p.error_of("op", status, b"").code, code)

