"""The protocol module without a dispatcher: decoding of durations,
timestamps, envelopes, errors and stream frames, and the bounds."""

import datetime as dt
import struct
import unittest

import toolwire
from toolwire import _protocol as p
from toolwire import types


class Protocol(unittest.TestCase):
    def test_durations_and_timestamps(self):
        self.assertEqual(types.duration("1.5s"), 1.5)
        self.assertEqual(types.duration("3600s"), 3600.0)
        self.assertEqual(types.duration("0.000000001s"), 1e-9)
        self.assertIsNone(types.duration("soon"))
        self.assertEqual(types.duration_json(0.25), "0.25s")
        self.assertEqual(types.duration_json(60), "60s")
        t = types.timestamp("2026-11-29T20:08:29.610201665Z")
        self.assertEqual(t, dt.datetime(2026, 11, 29, 20, 8, 29, 610201, tzinfo=dt.timezone.utc))
        self.assertIsNone(types.timestamp("yesterday"))

    def test_every_error_type_has_its_class(self):
        for name, cls in [("RATE_LIMIT", toolwire.RateLimitError), ("TIMEOUT", toolwire.ToolTimeoutError),
                          ("CANCELLED", toolwire.CallCancelledError), ("UNKNOWN_OUTCOME", toolwire.UnknownOutcomeError)]:
            e = types.tool_error({"type": "ERROR_TYPE_" + name, "message": "m", "retryable": True,
                                  "partialSideEffects": "PARTIAL_SIDE_EFFECTS_POSSIBLE", "retryAfter": "2.5s"})
            self.assertIsInstance(e, cls)
            self.assertEqual((e.type, e.retryable, e.side_effects, e.retry_after), (name, True, "POSSIBLE", 2.5))
        future = types.tool_error({"type": "ERROR_TYPE_SOMETHING_NEW"})
        self.assertIs(type(future), toolwire.ToolError)

    def test_not_ok_without_error_is_internal(self):
        r = types.Result.from_json("c1", {"ok": False})
        self.assertIsInstance(r.error, toolwire.InternalError)
        self.assertEqual(r.error.side_effects, "UNKNOWN")

    def test_terminal_states(self):
        with self.assertRaises(toolwire.PendingError) as cm:
            p.terminal({"callId": "c1", "state": "CALL_STATE_PENDING", "unconfirmed": True})
        self.assertTrue(cm.exception.unconfirmed)
        with self.assertRaises(toolwire.UnknownCallError):
            p.terminal({"callId": "c1", "state": "CALL_STATE_UNKNOWN"})

    def test_arguments(self):
        self.assertEqual(p.encode_args({"a": 1, "b": "é"}), '{"a":1,"b":"é"}')
        self.assertEqual(p.encode_args('{"n": 12345678901234567890}'), '{"n": 12345678901234567890}')
        self.assertIsNone(p.encode_args(None))
        with self.assertRaises(TypeError):
            p.call_body("echo", {}, {"sesion": "typo"})

    def test_frames(self):
        chunks = [p.frame({"event": {"callId": "c", "type": "CALL_EVENT_TYPE_PROGRESS", "percent": 50}}),
                  struct.pack(">BI", 2, 2) + b"{}"]
        data = memoryview(b"".join(chunks))
        pos = [0]

        def read(n):
            b = bytes(data[pos[0]:pos[0] + n])
            pos[0] += len(b)
            return b
        got = [p.stream_message("w", f, b, None) for f, b in p.iter_frames(read, "w")]
        self.assertEqual(got[0].type, "PROGRESS")
        self.assertEqual(got[0].percent, 50.0)
        self.assertIsNone(got[1])

    def test_stream_error_and_bounds(self):
        with self.assertRaises(toolwire.TransportError) as cm:
            p.stream_message("w", 2, b'{"error":{"code":"unavailable","message":"shutting down"}}', None)
        self.assertEqual(cm.exception.code, "unavailable")
        with self.assertRaises(toolwire.TransportError) as cm:
            p.frame_header(struct.pack(">BI", 0, p.MAX_MESSAGE_BYTES + 1), "w")
        self.assertEqual(cm.exception.code, "resource_exhausted")
        cut = iter([b"\x00\x00", b""])
        with self.assertRaises(toolwire.TransportError):
            list(p.iter_frames(lambda n: next(cut), "w"))

    def test_error_bodies(self):
        e = p.error_of("op", 401, b'{"code":"unauthenticated","message":"missing key"}')
        self.assertEqual((e.code, e.message, e.http_status), ("unauthenticated", "missing key", 401))
        e = p.error_of("op", 502, b"<html>bad gateway</html>")
        self.assertEqual(e.code, "unavailable")

    def test_resume_skips_seen_events(self):
        a = types.CallEvent.from_json({"callId": "c", "type": "CALL_EVENT_TYPE_STARTED", "time": "2026-01-01T00:00:00Z"})
        b = types.CallEvent.from_json({"callId": "c", "type": "CALL_EVENT_TYPE_FINISHED", "time": "2026-01-01T00:00:01Z"})
        b2 = types.CallEvent.from_json({"callId": "c", "type": "CALL_EVENT_TYPE_FINISHED", "time": "2026-01-01T00:00:02Z"})
        r = p.Resume([a, b])
        self.assertFalse(r.fresh(a))
        self.assertFalse(r.fresh(b2), "a call has one terminal event, whatever its time")

    def test_base_url(self):
        with self.assertRaises(ValueError):
            toolwire.Client("ftp://x")
        self.assertEqual(toolwire.client.parse_base_url("https://h/prefix/"), ("https", "h", 443, "/prefix"))


if __name__ == "__main__":
    unittest.main()
