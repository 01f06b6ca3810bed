"""The synchronous client (http.client, one pool of keep-alive
connections, safe to share between threads)."""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any, Iterator, List, Mapping, Optional, Tuple

from . import _protocol as p
from .errors import TransportError, WatchEndedError
from .types import (Approval, ApplyIntentsResult, ApproveResult, CallEvent, Grant, Result, Session,
                    Submission, ToolSpec, Usage)

__all__ = ["Client"]


def _MAYBE_RUN(u: p.Unary) -> str:
    if u.repeatable:
        return ""
    return " (the request may have been run; not sent again without an idempotency key)"

# Errors of a connection that broke before the answer. The request may
# have been read and run by then, so it is sent again (on a new connection)
# only when it is repeatable (p.Unary.repeatable); an idle connection the
# server closed is found before it is used (_Pool.get), not by this.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, http.client.BadStatusLine)

#: Bound on connecting (seconds) for a watch, whose requests have no timeout.
CONNECT_TIMEOUT = 15.0


def dead(sock: Optional[socket.socket]) -> bool:
    """Whether an idle keep-alive connection is unusable: the server closed
    it (EOF is readable) or sent something unasked. Checked before reuse,
    so that no request is written on a connection known to be closed."""
    if sock is None:
        return True
    try:
        if hasattr(select, "poll"):
            # poll, not select: select refuses descriptors of 1024 and
            # above, which a busy process has, and every connection would
            # then look dead and never be reused.
            p = select.poll()
            p.register(sock, select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR)
            return bool(p.poll(0))
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def parse_base_url(base_url: str) -> Tuple[str, str, int, str]:
    """(scheme, host, port, path prefix) of an http(s) base URL."""
    u = urllib.parse.urlsplit(base_url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"toolwire: base URL {base_url!r}: want http://host[:port] or https://host[:port]")
    port = u.port or (443 if u.scheme == "https" else 80)
    return u.scheme, u.hostname, port, u.path.rstrip("/")


class _Pool:
    """Keep-alive connections to one dispatcher: at most max_conns open
    (a request waits, up to its timeout, for one to be free), at most
    max_idle of them idle; a connection idle for longer than idle_timeout
    (below the dispatcher's 2m) or found closed by the server is closed.
    After close() every connection given back is closed."""

    def __init__(self, scheme: str, host: str, port: int, ssl_context: Optional[ssl.SSLContext],
                 max_idle: int = 32, max_conns: int = 100, idle_timeout: float = 60.0) -> None:
        self.scheme, self.host, self.port, self.ssl_context = scheme, host, port, ssl_context
        self.max_idle, self.max_conns, self.idle_timeout = max_idle, max_conns, idle_timeout
        self.idle: List[Tuple[http.client.HTTPConnection, float]] = []
        self.open = 0
        self.closed = False
        self.cond = threading.Condition()

    def get(self, timeout: Optional[float], fresh: bool, op: str) -> Tuple[http.client.HTTPConnection, bool]:
        """A connection (reused unless fresh) and whether it was reused;
        not yet connected when new."""
        deadline = None if timeout is None else time.monotonic() + timeout
        stale: List[http.client.HTTPConnection] = []
        try:
            with self.cond:
                while True:
                    if self.closed:
                        raise TransportError(op, "unavailable", "the client is closed")
                    while self.idle and not fresh:
                        conn, since = self.idle.pop()
                        if time.monotonic() - since < self.idle_timeout and not dead(conn.sock):
                            return conn, True
                        stale.append(conn)
                        self.open -= 1
                    if self.open < self.max_conns:
                        self.open += 1
                        break
                    if fresh and self.idle:
                        stale.append(self.idle.pop(0)[0])
                        self.open -= 1
                        continue
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise TransportError(op, "resource_exhausted",
                                             f"all {self.max_conns} connections busy")
                    self.cond.wait(left)
        finally:
            for c in stale:
                c.close()
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, context=self.ssl_context), False
        return http.client.HTTPConnection(self.host, self.port), False

    def put(self, conn: http.client.HTTPConnection) -> None:
        with self.cond:
            if not self.closed and len(self.idle) < self.max_idle:
                self.idle.append((conn, time.monotonic()))
                self.cond.notify()
                return
            self.open -= 1
            self.cond.notify()
        conn.close()

    def discard(self, conn: http.client.HTTPConnection) -> None:
        """Close a connection taken with get."""
        conn.close()
        with self.cond:
            self.open -= 1
            self.cond.notify()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            idle, self.idle = self.idle, []
            self.open -= len(idle)
            self.cond.notify_all()
        for conn, _ in idle:
            conn.close()


class Client:
    """A client of a toolwire dispatcher's API (Connect's JSON protocol).

    ``base_url`` is the dispatcher's address, e.g. "http://127.0.0.1:8080"
    (a path prefix is kept, for a dispatcher behind a reverse proxy);
    ``api_key`` authenticates every request as a bearer key, from which the
    dispatcher derives the caller's tenant, agent and scopes. ``timeout``
    bounds each request that does not wait on the server (seconds); Call
    and GetResult are given their wait plus a headroom. The client is safe
    for concurrent use; create one per dispatcher and share it, and close
    it (or use it as a context manager) to close its connections.
    """

    def __init__(self, base_url: str, api_key: Optional[str] = None, *, timeout: float = 30.0,
                 ssl_context: Optional[ssl.SSLContext] = None, max_idle: int = 32, max_conns: int = 100) -> None:
        scheme, host, port, self._prefix = parse_base_url(base_url)
        self._api_key = p.check_api_key(api_key)
        self.timeout = timeout
        self._pool = _Pool(scheme, host, port, ssl_context, max_idle, max_conns)

    def close(self) -> None:
        """Close the idle connections; a connection in use is closed when
        its request ends, and later requests fail."""
        self._pool.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- transport ----------------------------------------------------------

    def _send(self, method: str, body: bytes, timeout: Optional[float], u: p.Unary,
              ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send an RPC and read its answer's head. timeout bounds each read
        (None: no bound); a Watch (stream) gets no Connect deadline and a
        bounded connect. A request broken before its answer is sent once
        more, on a new connection, only when u.repeatable."""
        stream = u.method == "Watch"
        hdrs = p.headers(self._api_key, None if stream else timeout, stream)
        hdrs["Content-Length"] = str(len(body))
        fresh = False
        while True:
            conn, reused = self._pool.get(timeout, fresh, u.op)
            try:
                if conn.sock is None:
                    conn.timeout = CONNECT_TIMEOUT if stream and timeout is None else timeout
                    conn.connect()
                conn.sock.settimeout(timeout)
                conn.request("POST", self._prefix + p.SERVICE + method, body=body, headers=hdrs)
                return conn, conn.getresponse()
            except _STALE as e:
                self._pool.discard(conn)
                if not (reused and u.repeatable):
                    raise TransportError(u.op, "unavailable", (str(e) or type(e).__name__) + _MAYBE_RUN(u)) from None
                fresh = True
            except socket.timeout:
                self._pool.discard(conn)
                raise TransportError(u.op, "deadline_exceeded", "no answer in time") from None
            except (OSError, http.client.HTTPException) as e:
                self._pool.discard(conn)
                raise TransportError(u.op, "unavailable", str(e) or type(e).__name__) from None
            except BaseException:
                self._pool.discard(conn)
                raise

    def _unary(self, u: p.Unary) -> Any:
        conn, resp = self._send(u.method, p.encode_json(u.body), u.timeout, u)
        try:
            body = self._read_body(u, resp)
        except BaseException:
            resp.close()
            self._pool.discard(conn)
            raise
        try:
            out = p.decode_unary(u, resp.status, resp.getheader("Content-Type", ""), body)
        except TransportError:
            resp.close()
            self._pool.discard(conn)  # an error status or a malformed answer: not reused
            raise
        except BaseException:
            self._finish(conn, resp)  # PendingError, UnknownCallError, ...: a well-formed answer
            raise
        self._finish(conn, resp)
        return out

    @staticmethod
    def _read_body(u: p.Unary, resp: http.client.HTTPResponse) -> bytes:
        try:
            cl = resp.getheader("Content-Length")
            if cl is not None and not (cl.strip().isdigit() and cl.strip().isascii()):
                raise TransportError(u.op, "unavailable", "malformed Content-Length")
            if cl is not None and int(cl) > p.MAX_MESSAGE_BYTES:
                raise TransportError(u.op, "resource_exhausted", f"answer of {int(cl)} bytes over the limit")
            body = resp.read(p.MAX_MESSAGE_BYTES + 1)
        except socket.timeout:
            raise TransportError(u.op, "deadline_exceeded", "no answer in time") from None
        except (OSError, http.client.HTTPException, ValueError) as e:
            raise TransportError(u.op, "unavailable", str(e) or type(e).__name__) from None
        if len(body) > p.MAX_MESSAGE_BYTES:
            raise TransportError(u.op, "resource_exhausted", "answer over the limit")
        return body

    def _finish(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        """Give a connection whose answer was read whole back to the pool."""
        if resp.will_close or not resp.isclosed():
            resp.close()
            self._pool.discard(conn)
        else:
            self._pool.put(conn)

    # --- calls --------------------------------------------------------------

    def call(self, tool: str, args: p.Args = None, *, wait: float = 60.0, timeout: Optional[float] = None,
             **opts: Any) -> Result:
        """Submit a call of ``tool`` with ``args`` and wait for its terminal
        response, at most ``wait`` seconds (the call keeps running after).

        ``args`` is a dict (encoded with json.dumps) or JSON text as str or
        bytes (sent byte for byte: big integers survive). Options:
        ``session``, ``user``, ``run``, ``turn``, ``idempotency_key``,
        ``spec_version``, ``approval_token`` (redeem a token),
        ``apply_intents``, ``wait_for_approval``, ``schedule_to_start`` and
        ``schedule_to_close`` (seconds), ``pin_session_versions``.

        Returns the Result, which may hold a tool error (``result.error``,
        ``result.raise_for_error()``). Raises PendingError when the wait
        ended first, ApprovalRequiredError when the call is parked for an
        approver, TransportError when there is no answer.
        """
        return self._unary(p.call_op(tool, args, wait, timeout, opts))

    def submit(self, tool: str, args: p.Args = None, *, timeout: Optional[float] = None, **opts: Any) -> Submission:
        """Submit a call without waiting. A call refused at admission is not
        an exception: ``Submission.result`` says why; a parked call has
        ``Submission.approval``."""
        return self._unary(p.submit_op(tool, args, timeout or self.timeout, opts))

    def get_result(self, call_id: str, *, wait: float = 0.0, timeout: Optional[float] = None) -> Result:
        """The terminal response of a call, waiting up to ``wait`` seconds
        for a pending one. Raises PendingError, UnknownCallError,
        ApprovalRequiredError or TransportError as ``call`` does."""
        return self._unary(p.get_result_op(call_id, wait, timeout))

    def cancel(self, call_id: str, reason: str = "", *, timeout: Optional[float] = None) -> str:
        """Ask a call to stop: a queued call never runs, a running one has
        its context cancelled and answers CANCELLED. Returns "REQUESTED",
        "ALREADY_FINISHED" or "UNKNOWN_CALL"; twice, late or unknown is
        harmless."""
        return self._unary(p.cancel_op(call_id, reason, timeout or self.timeout))

    def watch(self, call_id: str, *, after: Optional[List[CallEvent]] = None, resume: int = 3,
              idle_timeout: Optional[float] = None) -> Iterator[CallEvent]:
        """Iterate over a call's lifecycle and progress events, from its
        admission on (earlier events are replayed), up to its terminal
        event (FINISHED with ``event.result``, or REJECTED).

        Resumable: when the stream breaks before the terminal event it is
        opened again, up to ``resume`` times in a row, and the events
        already yielded are skipped; ``after`` (events yielded by an
        earlier watch) skips those too. Raises UnknownCallError for an id
        the dispatcher does not know, WatchEndedError when resuming failed,
        TransportError for other failures of the first request.
        """
        state = p.Resume(after)
        failures = 0
        while True:
            once = self._watch_once(call_id, idle_timeout)
            try:
                for ev in once:
                    if not state.fresh(ev):
                        continue
                    state.mark(ev)
                    failures = 0
                    yield ev
                    if ev.terminal:
                        return
                cause: Optional[BaseException] = None
            except TransportError as e:
                if e.code in ("unauthenticated", "permission_denied", "invalid_argument", "resource_exhausted"):
                    raise
                cause = e
            finally:
                once.close()  # the stream's connection is closed now, not when collected
            failures += 1
            if failures > resume:
                raise WatchEndedError(call_id, cause)
            time.sleep(min(0.1 * 2 ** failures, 2.0))

    def _watch_once(self, call_id: str, idle_timeout: Optional[float]) -> Iterator[CallEvent]:
        op = "watch " + call_id
        not_found = p._unknown_call(call_id)
        u = p.Unary("Watch", {}, dict, 0.0, op, repeatable=True)
        conn, resp = self._send("Watch", p.frame({"callId": call_id}), idle_timeout, u)
        def read_exactly(n: int) -> bytes:
            try:
                return resp.read(n)
            except socket.timeout:
                raise TransportError(op, "deadline_exceeded", "no event within the idle timeout") from None
            except (OSError, http.client.HTTPException, ValueError) as e:
                raise TransportError(op, "unavailable", str(e) or type(e).__name__) from None
        try:
            if resp.status != 200:
                raise p.error_of(op, resp.status, read_exactly(p.MAX_MESSAGE_BYTES), lambda e: not_found(e))
            for flags, payload in p.iter_frames(read_exactly, op):
                ev = p.stream_message(op, flags, payload, lambda e: not_found(e))
                if ev is None:
                    return
                yield ev
        finally:
            resp.close()  # the response holds the socket too
            self._pool.discard(conn)

    # --- tools --------------------------------------------------------------

    def list_tools(self, name_glob: str = "", *, session: str = "", timeout: Optional[float] = None) -> List[ToolSpec]:
        """The tools the caller may use (its scopes, the policy, the
        session's mode), optionally those matching a name glob."""
        return self._unary(p.list_tools_op(name_glob, session, "native", timeout or self.timeout))

    def export_tools(self, fmt: str, name_glob: str = "", *, session: str = "",
                     timeout: Optional[float] = None) -> Any:
        """The caller's tools as a provider's tool list, decoded from JSON:
        ``fmt`` is "openai", "anthropic", "gemini" or "mcp"."""
        return self._unary(p.list_tools_op(name_glob, session, fmt, timeout or self.timeout))

    def get_tool(self, name: str, version: str = "", *, timeout: Optional[float] = None) -> ToolSpec:
        """One tool's spec (its current version, or ``version``)."""
        return self._unary(p.get_tool_op(name, version, timeout or self.timeout))

    # --- sessions -----------------------------------------------------------

    def get_session(self, session: str, *, timeout: Optional[float] = None) -> Session:
        """The state the reference applier keeps for a session."""
        return self._unary(p.session_op("GetSession", {"session": session}, timeout or self.timeout))

    def apply_intents(self, call_id: str, *, timeout: Optional[float] = None) -> ApplyIntentsResult:
        """Apply the intents of a finished call to its session, each exactly
        once (repeating applies nothing new)."""
        return self._unary(p.apply_intents_op(call_id, timeout or self.timeout))

    def set_session_mode(self, session: str, mode: str, *, timeout: Optional[float] = None) -> Session:
        """Set a session's mode (admin scope)."""
        return self._unary(p.session_op("SetSessionMode", {"session": session, "mode": mode}, timeout or self.timeout))

    def end_session(self, session: str, reason: str = "", *, timeout: Optional[float] = None) -> Session:
        """End a session: its later calls are refused SESSION_INACTIVE (admin scope)."""
        return self._unary(p.session_op("EndSession", {"session": session, "reason": reason}, timeout or self.timeout))

    # --- approvals ----------------------------------------------------------

    def list_approvals(self, state: str = "", *, tool: str = "", session: str = "", limit: int = 0,
                       timeout: Optional[float] = None) -> List[Approval]:
        """Approvals of the caller's tenant, newest first; ``state`` is
        "pending", "approved", "denied" or "expired" (approve scope)."""
        return self._unary(p.list_approvals_op(state, tool, session, limit, timeout or self.timeout))

    def get_approval(self, approval_id: str, *, timeout: Optional[float] = None) -> Approval:
        """One approval (approve scope)."""
        return self._unary(p.get_approval_op(approval_id, timeout or self.timeout))

    def approve(self, approval_id: str, *, scope: str = "once", reason: str = "",
                args_pattern: Optional[Mapping[str, str]] = None, ttl: Optional[float] = None, tool: str = "",
                timeout: Optional[float] = None) -> ApproveResult:
        """Approve a parked call, once or (``scope`` "session", "agent",
        "tenant") as a grant covering later calls (approve scope)."""
        return self._unary(p.approve_op(approval_id, scope, reason, args_pattern, ttl, tool, timeout or self.timeout))

    def deny(self, approval_id: str, reason: str, *, timeout: Optional[float] = None) -> Approval:
        """Deny a parked call; its caller gets PERMISSION_DENIED with the reason."""
        return self._unary(p.deny_op(approval_id, reason, timeout or self.timeout))

    def list_grants(self, *, agent: str = "", session: str = "", timeout: Optional[float] = None) -> List[Grant]:
        """The standing grants of the caller's tenant (approve scope)."""
        return self._unary(p.list_grants_op(agent, session, timeout or self.timeout))

    def revoke_grant(self, grant_id: str, *, timeout: Optional[float] = None) -> bool:
        """Remove a grant; True when it existed."""
        return self._unary(p.revoke_grant_op(grant_id, timeout or self.timeout))

    # --- usage --------------------------------------------------------------

    def usage(self, *, agent: str = "", session: str = "", user: str = "", run: str = "",
              timeout: Optional[float] = None) -> Usage:
        """Each limit of the policy in force as it stands for the caller's
        agent (or, with the admin scope, another agent, session, user or run)."""
        return self._unary(p.usage_op(agent, session, user, run, timeout or self.timeout))


