"""The asyncio client: the same methods as Client, as coroutines, over a
small HTTP/1.1 client on asyncio streams (the standard library has none)."""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Tuple

from . import _protocol as p
from .client import parse_base_url
from .errors import TransportError, WatchEndedError
from .types import (Approval, ApplyIntentsResult, ApproveResult, CallEvent, Grant, Result, Session,
                    Submission, ToolSpec, Usage)

__all__ = ["AsyncClient"]

_MAX_HEAD = 64 << 10  # response status line and headers


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.since = time.monotonic()

    def close(self) -> None:
        self.writer.close()


class _Response:
    """A response being read: status, headers and a body reader that
    undoes chunked transfer coding."""

    def __init__(self, conn: _Conn, status: int, headers: Dict[str, str]) -> None:
        self.conn, self.status, self.headers = conn, status, headers
        self.chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        cl = headers.get("content-length")
        self.left: Optional[int] = int(cl) if cl is not None and not self.chunked else None
        self.chunk_left = 0
        self.done = self.left == 0
        self.keep_alive = headers.get("connection", "").lower() != "close" and (self.chunked or self.left is not None)

    async def read_exactly(self, n: int) -> bytes:
        """n bytes of the body, fewer at its end."""
        out = bytearray()
        while len(out) < n and not self.done:
            if self.chunked:
                if self.chunk_left == 0:
                    size = (await self.conn.reader.readline()).split(b";")[0].strip()
                    if not size:
                        raise ConnectionError("truncated chunked body")
                    self.chunk_left = int(size, 16)
                    if self.chunk_left == 0:
                        while (await self.conn.reader.readline()) not in (b"\r\n", b"\n", b""):
                            pass
                        self.done = True
                        break
                take = min(self.chunk_left, n - len(out))
                out += await self.conn.reader.readexactly(take)
                self.chunk_left -= take
                if self.chunk_left == 0:
                    await self.conn.reader.readexactly(2)
            elif self.left is not None:
                take = min(self.left, n - len(out))
                out += await self.conn.reader.readexactly(take)
                self.left -= take
                self.done = self.left == 0
            else:
                b = await self.conn.reader.read(n - len(out))
                if not b:
                    self.done = True
                out += b
        return bytes(out)

    async def read_all(self, limit: int) -> bytes:
        if self.left is not None and self.left > limit:
            raise TransportError("read", "resource_exhausted", f"answer of {self.left} bytes over the limit")
        b = await self.read_exactly(limit + 1)
        if len(b) > limit:
            raise TransportError("read", "resource_exhausted", "answer over the limit")
        return b


class _AsyncPool:
    def __init__(self, scheme: str, host: str, port: int, ssl_context: Optional[ssl.SSLContext],
                 max_idle: int = 64, idle_timeout: float = 60.0) -> None:
        self.host, self.port = host, port
        self.ssl: Any = (ssl_context or ssl.create_default_context()) if scheme == "https" else None
        self.max_idle, self.idle_timeout = max_idle, idle_timeout
        self.idle: List[_Conn] = []

    async def get(self) -> Tuple[_Conn, bool]:
        now = time.monotonic()
        while self.idle:
            c = self.idle.pop()
            if now - c.since < self.idle_timeout and not c.reader.at_eof():
                return c, True
            c.close()
        r, w = await asyncio.open_connection(self.host, self.port, ssl=self.ssl, limit=_MAX_HEAD)
        return _Conn(r, w), False

    def put(self, c: _Conn) -> None:
        if len(self.idle) < self.max_idle:
            c.since = time.monotonic()
            self.idle.append(c)
        else:
            c.close()

    def close(self) -> None:
        idle, self.idle = self.idle, []
        for c in idle:
            c.close()


class AsyncClient:
    """The asyncio client of a toolwire dispatcher; see Client for the
    arguments and each method's meaning. Use it from one event loop, and
    close it (``await client.close()`` or ``async with``)."""

    def __init__(self, base_url: str, api_key: Optional[str] = None, *, timeout: float = 30.0,
                 ssl_context: Optional[ssl.SSLContext] = None, max_idle: int = 64) -> None:
        scheme, host, port, self._prefix = parse_base_url(base_url)
        self._host_header = host if port in (80, 443) else f"{host}:{port}"
        self._api_key = api_key
        self.timeout = timeout
        self._pool = _AsyncPool(scheme, host, port, ssl_context, max_idle)

    async def close(self) -> None:
        """Close the idle connections."""
        self._pool.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # --- transport ----------------------------------------------------------

    def _request_bytes(self, method: str, body: bytes, timeout: Optional[float], stream: bool) -> bytes:
        hdrs = p.headers(self._api_key, timeout, stream)
        lines = [f"POST {self._prefix}{p.SERVICE}{method} HTTP/1.1", f"Host: {self._host_header}",
                 f"Content-Length: {len(body)}"] + [f"{k}: {v}" for k, v in hdrs.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    async def _send(self, method: str, body: bytes, timeout: Optional[float], stream: bool, op: str) -> _Response:
        data = self._request_bytes(method, body, timeout, stream)
        for _ in range(2):
            conn, reused = await self._pool.get()
            try:
                conn.writer.write(data)
                await conn.writer.drain()
                status_line = await conn.reader.readline()
                if not status_line:
                    raise ConnectionResetError("connection closed before the answer")
                parts = status_line.decode("latin-1").split(" ", 2)
                status = int(parts[1])
                headers: Dict[str, str] = {}
                while True:
                    line = await conn.reader.readline()
                    if line in (b"\r\n", b"\n", b""):
                        break
                    k, _, v = line.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
                return _Response(conn, status, headers)
            except (ConnectionResetError, BrokenPipeError, asyncio.IncompleteReadError) as e:
                conn.close()
                if not reused:
                    raise TransportError(op, "unavailable", str(e) or type(e).__name__) from None
            except (OSError, ValueError, IndexError, asyncio.LimitOverrunError) as e:
                conn.close()
                raise TransportError(op, "unavailable", str(e) or type(e).__name__) from None
            except BaseException:
                conn.close()
                raise
        raise TransportError(op, "unavailable", "connection closed")

    async def _unary_io(self, u: p.Unary) -> Any:
        resp = await self._send(u.method, p.encode_json(u.body), u.timeout, False, u.op)
        try:
            body = await resp.read_all(p.MAX_MESSAGE_BYTES)
        except TransportError as e:
            resp.conn.close()
            raise TransportError(u.op, e.code, e.message) from None
        except (OSError, ValueError, asyncio.IncompleteReadError) as e:
            resp.conn.close()
            raise TransportError(u.op, "unavailable", str(e) or type(e).__name__) from None
        except BaseException:
            resp.conn.close()
            raise
        if resp.keep_alive and resp.done:
            self._pool.put(resp.conn)
        else:
            resp.conn.close()
        return p.decode_unary(u, resp.status, resp.headers.get("content-type", ""), body)

    async def _unary(self, u: p.Unary) -> Any:
        try:
            return await asyncio.wait_for(self._unary_io(u), u.timeout)
        except asyncio.TimeoutError:
            raise TransportError(u.op, "deadline_exceeded", "no answer in time") from None

    # --- calls --------------------------------------------------------------

    async def call(self, tool: str, args: p.Args = None, *, wait: float = 60.0, timeout: Optional[float] = None,
                   **opts: Any) -> Result:
        """See Client.call."""
        return await self._unary(p.call_op(tool, args, wait, timeout, opts))

    async def submit(self, tool: str, args: p.Args = None, *, timeout: Optional[float] = None,
                     **opts: Any) -> Submission:
        """See Client.submit."""
        return await self._unary(p.submit_op(tool, args, timeout or self.timeout, opts))

    async def get_result(self, call_id: str, *, wait: float = 0.0, timeout: Optional[float] = None) -> Result:
        """See Client.get_result."""
        return await self._unary(p.get_result_op(call_id, wait, timeout))

    async def cancel(self, call_id: str, reason: str = "", *, timeout: Optional[float] = None) -> str:
        """See Client.cancel."""
        return await self._unary(p.cancel_op(call_id, reason, timeout or self.timeout))

    async def watch(self, call_id: str, *, after: Optional[List[CallEvent]] = None, resume: int = 3,
                    idle_timeout: Optional[float] = None) -> AsyncIterator[CallEvent]:
        """See Client.watch: an async iterator of the call's events,
        resumed when the stream breaks."""
        state = p.Resume(after)
        failures = 0
        while True:
            cause: Optional[BaseException] = None
            try:
                async for ev in self._watch_once(call_id, idle_timeout):
                    if not state.fresh(ev):
                        continue
                    state.mark(ev)
                    failures = 0
                    yield ev
                    if ev.terminal:
                        return
            except TransportError as e:
                if e.code in ("unauthenticated", "permission_denied", "invalid_argument", "resource_exhausted"):
                    raise
                cause = e
            failures += 1
            if failures > resume:
                raise WatchEndedError(call_id, cause)
            await asyncio.sleep(min(0.1 * 2 ** failures, 2.0))

    async def _watch_once(self, call_id: str, idle_timeout: Optional[float]) -> AsyncIterator[CallEvent]:
        op = "watch " + call_id
        not_found = p._unknown_call(call_id)
        resp = await self._send("Watch", p.frame({"callId": call_id}), idle_timeout, True, op)
        try:
            if resp.status != 200:
                raise p.error_of(op, resp.status, await resp.read_all(p.MAX_MESSAGE_BYTES), not_found)
            while True:
                h = await self._read(resp, 5, idle_timeout, op)
                if not h:
                    return
                if len(h) < 5:
                    raise TransportError(op, "unavailable", "stream cut inside a frame header")
                flags, n = p.frame_header(h, op)
                payload = await self._read(resp, n, idle_timeout, op) if n else b""
                if len(payload) < n:
                    raise TransportError(op, "unavailable", "stream cut inside a frame")
                ev = p.stream_message(op, flags, payload, not_found)
                if ev is None:
                    return
                yield ev
        finally:
            resp.conn.close()

    @staticmethod
    async def _read(resp: _Response, n: int, idle_timeout: Optional[float], op: str) -> bytes:
        try:
            return await asyncio.wait_for(resp.read_exactly(n), idle_timeout)
        except asyncio.TimeoutError:
            raise TransportError(op, "deadline_exceeded", "no event within the idle timeout") from None
        except (OSError, ValueError, asyncio.IncompleteReadError) as e:
            raise TransportError(op, "unavailable", str(e) or type(e).__name__) from None

    # --- tools, sessions, approvals, usage -----------------------------------

    async def list_tools(self, name_glob: str = "", *, session: str = "",
                         timeout: Optional[float] = None) -> List[ToolSpec]:
        """See Client.list_tools."""
        return await self._unary(p.list_tools_op(name_glob, session, "native", timeout or self.timeout))

    async def export_tools(self, fmt: str, name_glob: str = "", *, session: str = "",
                           timeout: Optional[float] = None) -> Any:
        """See Client.export_tools."""
        return await self._unary(p.list_tools_op(name_glob, session, fmt, timeout or self.timeout))

    async def get_tool(self, name: str, version: str = "", *, timeout: Optional[float] = None) -> ToolSpec:
        """See Client.get_tool."""
        return await self._unary(p.get_tool_op(name, version, timeout or self.timeout))

    async def get_session(self, session: str, *, timeout: Optional[float] = None) -> Session:
        """See Client.get_session."""
        return await self._unary(p.session_op("GetSession", {"session": session}, timeout or self.timeout))

    async def apply_intents(self, call_id: str, *, timeout: Optional[float] = None) -> ApplyIntentsResult:
        """See Client.apply_intents."""
        return await self._unary(p.apply_intents_op(call_id, timeout or self.timeout))

    async def set_session_mode(self, session: str, mode: str, *, timeout: Optional[float] = None) -> Session:
        """See Client.set_session_mode."""
        return await self._unary(p.session_op("SetSessionMode", {"session": session, "mode": mode},
                                              timeout or self.timeout))

    async def end_session(self, session: str, reason: str = "", *, timeout: Optional[float] = None) -> Session:
        """See Client.end_session."""
        return await self._unary(p.session_op("EndSession", {"session": session, "reason": reason},
                                              timeout or self.timeout))

    async def list_approvals(self, state: str = "", *, tool: str = "", session: str = "", limit: int = 0,
                             timeout: Optional[float] = None) -> List[Approval]:
        """See Client.list_approvals."""
        return await self._unary(p.list_approvals_op(state, tool, session, limit, timeout or self.timeout))

    async def get_approval(self, approval_id: str, *, timeout: Optional[float] = None) -> Approval:
        """See Client.get_approval."""
        return await self._unary(p.get_approval_op(approval_id, timeout or self.timeout))

    async def approve(self, approval_id: str, *, scope: str = "once", reason: str = "",
                      args_pattern: Optional[Mapping[str, str]] = None, ttl: Optional[float] = None,
                      tool: str = "", timeout: Optional[float] = None) -> ApproveResult:
        """See Client.approve."""
        return await self._unary(p.approve_op(approval_id, scope, reason, args_pattern, ttl, tool,
                                              timeout or self.timeout))

    async def deny(self, approval_id: str, reason: str, *, timeout: Optional[float] = None) -> Approval:
        """See Client.deny."""
        return await self._unary(p.deny_op(approval_id, reason, timeout or self.timeout))

    async def list_grants(self, *, agent: str = "", session: str = "",
                          timeout: Optional[float] = None) -> List[Grant]:
        """See Client.list_grants."""
        return await self._unary(p.list_grants_op(agent, session, timeout or self.timeout))

    async def revoke_grant(self, grant_id: str, *, timeout: Optional[float] = None) -> bool:
        """See Client.revoke_grant."""
        return await self._unary(p.revoke_grant_op(grant_id, timeout or self.timeout))

    async def usage(self, *, agent: str = "", session: str = "", user: str = "", run: str = "",
                    timeout: Optional[float] = None) -> Usage:
        """See Client.usage."""
        return await self._unary(p.usage_op(agent, session, user, run, timeout or self.timeout))
