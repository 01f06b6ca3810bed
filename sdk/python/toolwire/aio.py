"""The asyncio client: the same methods as Client, as coroutines, over a
small HTTP/1.1 client on asyncio streams (the standard library has none)."""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Tuple

from . import _protocol as p
from .client import CONNECT_TIMEOUT, _MAYBE_RUN, dead, parse_base_url
from .errors import TransportError, WatchEndedError
from .types import (Approval, ApplyIntentsResult, ApproveResult, CallEvent, Grant, Result, Session,
                    Submission, ToolSpec, Usage)

__all__ = ["AsyncClient"]

_MAX_HEAD = 64 << 10  # response status line and headers, together (and a chunked body's trailers)
_MAX_HEADERS = 100  # header lines of a response (http.client's bound), and trailer lines


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
        if cl is not None and not (cl.isascii() and cl.isdigit()):
            raise ValueError("malformed Content-Length")
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
                    if len(size) > 16 or size.strip(b"0123456789abcdefABCDEF"):
                        raise ValueError("malformed chunk size")
                    self.chunk_left = int(size, 16)
                    if self.chunk_left == 0:
                        await read_head_lines(self.conn.reader)  # the trailers, bounded
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


async def read_head_lines(reader: asyncio.StreamReader) -> List[bytes]:
    """Header (or trailer) lines up to the blank line: at most _MAX_HEADERS
    lines of at most _MAX_HEAD bytes together, else ValueError."""
    lines: List[bytes] = []
    total = 0
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            return lines
        total += len(line)
        if len(lines) >= _MAX_HEADERS or total > _MAX_HEAD:
            raise ValueError(f"answer head over {_MAX_HEADERS} lines or {_MAX_HEAD} bytes")
        lines.append(line)


class _AsyncPool:
    """As client._Pool: at most max_conns open (a request waits for one to
    be free, within its own timeout), max_idle idle, dead idle ones found
    before reuse, everything given back after close() closed."""

    def __init__(self, scheme: str, host: str, port: int, ssl_context: Optional[ssl.SSLContext],
                 max_idle: int = 64, max_conns: int = 100, idle_timeout: float = 60.0) -> None:
        self.host, self.port = host, port
        self.ssl: Any = (ssl_context or ssl.create_default_context()) if scheme == "https" else None
        self.max_idle, self.max_conns, self.idle_timeout = max_idle, max_conns, idle_timeout
        self.idle: List[_Conn] = []
        self.open = 0
        self.closed = False
        self.waiters: List["asyncio.Future[None]"] = []

    async def get(self, fresh: bool, op: str) -> Tuple[_Conn, bool]:
        while True:
            if self.closed:
                raise TransportError(op, "unavailable", "the client is closed")
            while self.idle and not fresh:
                c = self.idle.pop()
                if time.monotonic() - c.since < self.idle_timeout and not c.reader.at_eof() and \
                        not dead(c.writer.get_extra_info("socket")):
                    return c, True
                self._drop(c)
            if fresh and self.idle and self.open >= self.max_conns:
                self._drop(self.idle.pop(0))
            if self.open < self.max_conns:
                break
            fut = asyncio.get_running_loop().create_future()
            self.waiters.append(fut)
            try:
                await fut
            except BaseException:
                if fut.done() and not fut.cancelled():
                    self._wake()  # woken, then cancelled: pass the free connection on
                raise
            finally:
                if fut in self.waiters:
                    self.waiters.remove(fut)
        self.open += 1
        try:
            r, w = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, ssl=self.ssl, limit=_MAX_HEAD), CONNECT_TIMEOUT)
        except BaseException:
            self.open -= 1
            self._wake()
            raise
        return _Conn(r, w), False

    def _wake(self) -> None:
        for fut in self.waiters:
            if not fut.done():
                fut.set_result(None)
                return

    def _drop(self, c: _Conn) -> None:
        c.close()
        self.open -= 1
        self._wake()

    def put(self, c: _Conn) -> None:
        if not self.closed and len(self.idle) < self.max_idle:
            c.since = time.monotonic()
            self.idle.append(c)
            self._wake()
        else:
            self._drop(c)

    def discard(self, c: _Conn) -> None:
        """Close a connection taken with get."""
        self._drop(c)

    def close(self) -> None:
        self.closed = True
        idle, self.idle = self.idle, []
        for c in idle:
            self._drop(c)
        for fut in self.waiters:
            if not fut.done():
                fut.set_result(None)


class AsyncClient:
    """The asyncio client of a toolwire dispatcher; see Client for the
    arguments and each method's meaning. Use it from one event loop, and
    close it (``await client.close()`` or ``async with``)."""

    def __init__(self, base_url: str, api_key: Optional[str] = None, *, timeout: float = 30.0,
                 ssl_context: Optional[ssl.SSLContext] = None, max_idle: int = 64, max_conns: int = 100) -> None:
        scheme, host, port, self._prefix = parse_base_url(base_url)
        h = f"[{host}]" if ":" in host else host
        self._host_header = h if port in (80, 443) else f"{h}:{port}"
        self._api_key = p.check_api_key(api_key)
        self.timeout = timeout
        self._pool = _AsyncPool(scheme, host, port, ssl_context, max_idle, max_conns)

    async def close(self) -> None:
        """Close the idle connections; a connection in use is closed when
        its request ends, and later requests fail."""
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

    async def _send(self, method: str, body: bytes, timeout: Optional[float], u: p.Unary) -> _Response:
        """As Client._send: sent again on a new connection, after it broke
        before the answer, only when u.repeatable; a Watch sends no Connect
        deadline."""
        stream = u.method == "Watch"
        data = self._request_bytes(method, body, None if stream else timeout, stream)
        fresh = False
        while True:
            conn, reused = await self._pool.get(fresh, u.op)
            try:
                conn.writer.write(data)
                await conn.writer.drain()
                status_line = await conn.reader.readline()
                if not status_line:
                    raise ConnectionResetError("connection closed before the answer")
                # "HTTP/1.1 200" without a reason phrase is a valid status line.
                parts = status_line.decode("latin-1").rstrip("\r\n").split(" ", 2)
                if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
                    raise ValueError("malformed status line")
                headers: Dict[str, str] = {}
                for line in await read_head_lines(conn.reader):
                    k, _, v = line.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
                return _Response(conn, int(parts[1]), headers)
            except (ConnectionResetError, BrokenPipeError, asyncio.IncompleteReadError) as e:
                self._pool.discard(conn)
                if not (reused and u.repeatable):
                    raise TransportError(u.op, "unavailable", (str(e) or type(e).__name__) + _MAYBE_RUN(u)) from None
                fresh = True
            except (OSError, ValueError, IndexError, asyncio.LimitOverrunError) as e:
                self._pool.discard(conn)
                raise TransportError(u.op, "unavailable", str(e) or type(e).__name__) from None
            except BaseException:
                self._pool.discard(conn)
                raise

    async def _unary_io(self, u: p.Unary) -> Any:
        resp = await self._send(u.method, p.encode_json(u.body), u.timeout, u)
        try:
            body = await resp.read_all(p.MAX_MESSAGE_BYTES)
        except TransportError as e:
            self._pool.discard(resp.conn)
            raise TransportError(u.op, e.code, e.message) from None
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
            self._pool.discard(resp.conn)
            raise TransportError(u.op, "unavailable", str(e) or type(e).__name__) from None
        except BaseException:
            self._pool.discard(resp.conn)
            raise
        try:
            out = p.decode_unary(u, resp.status, resp.headers.get("content-type", ""), body)
        except TransportError:
            self._pool.discard(resp.conn)  # an error status or a malformed answer: not reused
            raise
        except BaseException:
            self._finish(resp)  # PendingError, UnknownCallError, ...: a well-formed answer
            raise
        self._finish(resp)
        return out

    def _finish(self, resp: _Response) -> None:
        if resp.keep_alive and resp.done:
            self._pool.put(resp.conn)
        else:
            self._pool.discard(resp.conn)

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
            once = self._watch_once(call_id, idle_timeout)
            try:
                async for ev in once:
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
            finally:
                await once.aclose()  # so that aclose() of the watch closes the stream before it returns
            failures += 1
            if failures > resume:
                raise WatchEndedError(call_id, cause)
            await asyncio.sleep(min(0.1 * 2 ** failures, 2.0))

    async def _watch_once(self, call_id: str, idle_timeout: Optional[float]) -> AsyncIterator[CallEvent]:
        op = "watch " + call_id
        not_found = p._unknown_call(call_id)
        u = p.Unary("Watch", {}, dict, 0.0, op, repeatable=True)
        try:  # connect and the answer's head under the idle timeout too
            resp = await asyncio.wait_for(self._send("Watch", p.frame({"callId": call_id}), idle_timeout, u),
                                          idle_timeout)
        except asyncio.TimeoutError:
            raise TransportError(op, "deadline_exceeded", "no answer within the idle timeout") from None
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
            self._pool.discard(resp.conn)

    @staticmethod
    async def _read(resp: _Response, n: int, idle_timeout: Optional[float], op: str) -> bytes:
        try:
            return await asyncio.wait_for(resp.read_exactly(n), idle_timeout)
        except asyncio.TimeoutError:
            raise TransportError(op, "deadline_exceeded", "no event within the idle timeout") from None
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
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
