"""The synchronous client (http.client, one pool of keep-alive
connections, safe to share between threads)."""

from __future__ import annotations

import http.client
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

# Errors of a reused keep-alive connection the server closed while it sat
# idle: the request never reached a handler, so it is sent once more on a
# fresh connection.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, http.client.BadStatusLine)


def parse_base_url(base_url: str) -> Tuple[str, str, int, str]:
    """(scheme, host, port, path prefix) of an http(s) base URL."""
    u = urllib.parse.urlsplit(base_url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"toolwire: base URL {base_url!r}: want http://host[:port] or https://host[:port]")
    port = u.port or (443 if u.scheme == "https" else 80)
    return u.scheme, u.hostname, port, u.path.rstrip("/")


class _Pool:
    """Idle keep-alive connections to one dispatcher; a connection idle for
    longer than idle_timeout (below the dispatcher's 2m) is closed."""

    def __init__(self, scheme: str, host: str, port: int, ssl_context: Optional[ssl.SSLContext],
                 max_idle: int = 32, idle_timeout: float = 60.0) -> None:
        self.scheme, self.host, self.port, self.ssl_context = scheme, host, port, ssl_context
        self.max_idle, self.idle_timeout = max_idle, idle_timeout
        self.idle: List[Tuple[http.client.HTTPConnection, float]] = []
        self.lock = threading.Lock()

    def get(self, timeout: Optional[float]) -> Tuple[http.client.HTTPConnection, bool]:
        now = time.monotonic()
        with self.lock:
            while self.idle:
                conn, since = self.idle.pop()
                if now - since < self.idle_timeout:
                    conn.timeout = timeout
                    if conn.sock is not None:
                        conn.sock.settimeout(timeout)
                    return conn, True
                conn.close()
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.ssl_context), False
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout), False

    def put(self, conn: http.client.HTTPConnection) -> None:
        with self.lock:
            if len(self.idle) < self.max_idle:
                self.idle.append((conn, time.monotonic()))
                return
        conn.close()

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
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
                 ssl_context: Optional[ssl.SSLContext] = None, max_idle: int = 32) -> None:
        scheme, host, port, self._prefix = parse_base_url(base_url)
        self._api_key = api_key
        self.timeout = timeout
        self._pool = _Pool(scheme, host, port, ssl_context, max_idle)

    def close(self) -> None:
        """Close the idle connections."""
        self._pool.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- transport ----------------------------------------------------------

    def _send(self, method: str, body: bytes, timeout: Optional[float], stream: bool, op: str
              ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        hdrs = p.headers(self._api_key, timeout, stream)
        hdrs["Content-Length"] = str(len(body))
        for _ in range(2):
            conn, reused = self._pool.get(timeout)
            try:
                conn.request("POST", self._prefix + p.SERVICE + method, body=body, headers=hdrs)
                return conn, conn.getresponse()
            except _STALE as e:
                conn.close()
                if not reused:
                    raise TransportError(op, "unavailable", str(e) or type(e).__name__) from None
            except socket.timeout:
                conn.close()
                raise TransportError(op, "deadline_exceeded", "no answer in time") from None
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise TransportError(op, "unavailable", str(e) or type(e).__name__) from None
        raise TransportError(op, "unavailable", "connection closed")  # not reached

    def _unary(self, u: p.Unary) -> Any:
        conn, resp = self._send(u.method, p.encode_json(u.body), u.timeout, False, u.op)
        try:
            n = int(resp.getheader("Content-Length") or -1)
            if n > p.MAX_MESSAGE_BYTES:
                raise TransportError(u.op, "resource_exhausted", f"answer of {n} bytes over the limit")
            body = resp.read(p.MAX_MESSAGE_BYTES + 1)
            if len(body) > p.MAX_MESSAGE_BYTES:
                raise TransportError(u.op, "resource_exhausted", "answer over the limit")
        except socket.timeout:
            conn.close()
            raise TransportError(u.op, "deadline_exceeded", "no answer in time") from None
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise TransportError(u.op, "unavailable", str(e) or type(e).__name__) from None
        except TransportError:
            conn.close()
            raise
        if resp.will_close:
            conn.close()
        else:
            self._pool.put(conn)
        return p.decode_unary(u, resp.status, resp.getheader("Content-Type", ""), body)

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
            try:
                for ev in self._watch_once(call_id, idle_timeout):
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
            failures += 1
            if failures > resume:
                raise WatchEndedError(call_id, cause)
            time.sleep(min(0.1 * 2 ** failures, 2.0))

    def _watch_once(self, call_id: str, idle_timeout: Optional[float]) -> Iterator[CallEvent]:
        op = "watch " + call_id
        not_found = p._unknown_call(call_id)
        conn, resp = self._send("Watch", p.frame({"callId": call_id}), idle_timeout, True, op)
        try:
            if resp.status != 200:
                raise p.error_of(op, resp.status, resp.read(p.MAX_MESSAGE_BYTES), lambda e: not_found(e))

            def read_exactly(n: int) -> bytes:
                try:
                    return resp.read(n)
                except socket.timeout:
                    raise TransportError(op, "deadline_exceeded", "no event within the idle timeout") from None
                except (OSError, http.client.HTTPException) as e:
                    raise TransportError(op, "unavailable", str(e) or type(e).__name__) from None
            for flags, payload in p.iter_frames(read_exactly, op):
                ev = p.stream_message(op, flags, payload, lambda e: not_found(e))
                if ev is None:
                    return
                yield ev
        finally:
            conn.close()

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


