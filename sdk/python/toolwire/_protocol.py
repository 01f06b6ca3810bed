"""Connect's JSON protocol, without I/O: what each RPC sends, how its
answer and its errors decode, and the envelope of stream frames. The sync
client (client.py) and the asyncio one (aio.py) share it, so they cannot
answer differently."""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from .errors import ApprovalRequiredError, PendingError, TransportError, UnknownCallError
from .types import (Approval, ApplyIntentsResult, ApproveResult, AppliedIntent, CallEvent, Grant,
                    LimitUsage, Result, Session, Submission, ToolSpec, Usage, duration_json,
                    tool_error)

SERVICE = "/toolwire.v1.DispatcherService/"
USER_AGENT = "toolwire-python/0.1"

#: Largest response body (or stream frame) the client reads; a longer one
#: is refused before it is read whole.
MAX_MESSAGE_BYTES = 64 << 20

#: Extra time a request is given beyond the wait the dispatcher is asked
#: for, so that the dispatcher answers (PENDING) before the client gives up.
HEADROOM = 10.0

_END_STREAM = 0x02
_COMPRESSED = 0x01

Args = Union[None, str, bytes, Mapping[str, Any], List[Any]]

# Connect codes by HTTP status, for error bodies that are not Connect's:
# Connect's own table (connect-go's httpToCode); any other status is unknown.
_HTTP_CODES = {400: "internal", 401: "unauthenticated", 403: "permission_denied", 404: "unimplemented",
               429: "unavailable", 502: "unavailable", 503: "unavailable", 504: "unavailable"}

# What a malformed answer of a broken or hostile server can raise while it
# is decoded; each is turned into a TransportError.
_MALFORMED = (ValueError, TypeError, AttributeError, KeyError, IndexError, RecursionError, OverflowError)


@dataclass
class Unary:
    """One unary RPC: its method, its JSON body, how long it may take, how
    its answer decodes, and how a transport error of it maps."""

    method: str
    body: Dict[str, Any]
    decode: Callable[[Dict[str, Any]], Any]
    timeout: float
    op: str
    not_found: Optional[Callable[[TransportError], Exception]] = None
    #: Safe to send twice: a read, or a call carrying an idempotency key.
    #: Only such a request is sent again after it was written on a
    #: connection that broke before the answer.
    repeatable: bool = False


def encode_args(args: Args) -> Optional[str]:
    """Arguments as exact JSON text: str/bytes are sent byte for byte (the
    JSON an LLM emitted: big integers and key order survive), anything
    else is encoded with json.dumps."""
    if args is None:
        return None
    if isinstance(args, bytes):
        try:
            return args.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("toolwire: arguments given as bytes must be UTF-8 JSON text") from None
    if isinstance(args, str):
        return args
    return json.dumps(args, separators=(",", ":"), ensure_ascii=False)


def call_body(tool: str, args: Args, opts: Dict[str, Any]) -> Dict[str, Any]:
    """A CallRequest/SubmitRequest body from the keyword options of call
    and submit (snake_case, as in the proto)."""
    body: Dict[str, Any] = {"tool": tool}
    a = encode_args(args)
    if a is not None:
        body["argumentsJson"] = a
    names = {"idempotency_key": "idempotencyKey", "session": "session", "user": "user", "run": "run",
             "turn": "turn", "spec_version": "specVersion", "approval_token": "approvalToken",
             "apply_intents": "applyIntents", "wait_for_approval": "waitForApproval",
             "pin_session_versions": "pinSessionVersions"}
    for k, v in opts.items():
        if v is None or v is False or v == "":
            continue
        if k in names:
            body[names[k]] = v
        elif k in ("schedule_to_start", "schedule_to_close"):
            body["scheduleToStart" if k == "schedule_to_start" else "scheduleToClose"] = duration_json(float(v))
        else:
            raise TypeError(f"toolwire: unknown call option {k!r}")
    return body


def call_op(tool: str, args: Args, wait: float, timeout: Optional[float], opts: Dict[str, Any]) -> Unary:
    body = call_body(tool, args, opts)
    wait = fit_wait(wait, timeout)
    body["wait"] = duration_json(wait)

    def decode(m: Dict[str, Any]) -> Result:
        r = terminal(m)
        if m.get("session"):
            r.session = Session.from_json(m["session"])
        r.apply_error = m.get("applyError", "")
        return r
    return Unary("Call", body, decode, timeout if timeout is not None else wait + HEADROOM, "call " + tool,
                 repeatable=bool(body.get("idempotencyKey")))


def fit_wait(wait: float, timeout: Optional[float]) -> float:
    """The wait the dispatcher is asked for, fitted inside the request's
    timeout so that it answers (PENDING) before the client gives up."""
    if timeout is None:
        return wait
    return min(wait, max(timeout - min(max(timeout / 10, 0.1), 1.0), 0.001))


def terminal(m: Dict[str, Any]) -> Result:
    """A (call id, state, response) answer as a Result, or the StateError /
    ApprovalRequiredError it is."""
    call_id, state, resp = m.get("callId", ""), m.get("state", ""), m.get("response")
    if state == "CALL_STATE_DONE" and resp:
        return Result.from_json(call_id, resp)
    if state == "CALL_STATE_AWAITING_APPROVAL" and resp and resp.get("error"):
        raise tool_error(resp["error"], call_id, resp.get("tool", ""))
    if state == "CALL_STATE_PENDING":
        raise PendingError(call_id, bool(m.get("unconfirmed")))
    raise UnknownCallError(call_id)


def submit_op(tool: str, args: Args, timeout: float, opts: Dict[str, Any]) -> Unary:
    def decode(m: Dict[str, Any]) -> Submission:
        call_id, state, resp = m.get("callId", ""), m.get("state", ""), m.get("response")
        sub = Submission(call_id=call_id, duplicate=bool(m.get("duplicate")), unconfirmed=bool(m.get("unconfirmed")),
                         state=state.replace("CALL_STATE_", "") or "PENDING")
        if state == "CALL_STATE_AWAITING_APPROVAL" and resp and resp.get("error"):
            err = tool_error(resp["error"], call_id, resp.get("tool", ""))
            if isinstance(err, ApprovalRequiredError):
                sub.approval = err
        elif resp:
            sub.result = Result.from_json(call_id, resp)
        return sub
    body = call_body(tool, args, opts)
    return Unary("Submit", body, decode, timeout, "submit " + tool, repeatable=bool(body.get("idempotencyKey")))


def _unknown_call(call_id: str) -> Callable[[TransportError], Exception]:
    def f(e: TransportError) -> Exception:
        return UnknownCallError(call_id) if "unknown call" in e.message else e
    return f


def get_result_op(call_id: str, wait: float, timeout: Optional[float]) -> Unary:
    body: Dict[str, Any] = {"callId": call_id}
    if wait > 0:
        body["wait"] = duration_json(fit_wait(wait, timeout))
    return Unary("GetResult", body, terminal, timeout if timeout is not None else wait + HEADROOM,
                 "get result " + call_id, _unknown_call(call_id), repeatable=True)


def cancel_op(call_id: str, reason: str, timeout: float) -> Unary:
    body = {"callId": call_id}
    if reason:
        body["reason"] = reason
    return Unary("Cancel", body, lambda m: m.get("outcome", "CANCEL_OUTCOME_UNSPECIFIED").replace("CANCEL_OUTCOME_", ""),
                 timeout, "cancel " + call_id)


def _format(fmt: str) -> str:
    f = fmt.upper()
    if f not in ("NATIVE", "OPENAI", "ANTHROPIC", "GEMINI", "MCP"):
        raise ValueError(f"toolwire: unknown tool format {fmt!r} (native, openai, anthropic, gemini, mcp)")
    return "TOOL_FORMAT_" + f


def list_tools_op(name_glob: str, session: str, fmt: str, timeout: float) -> Unary:
    body: Dict[str, Any] = {"format": _format(fmt)}
    if name_glob:
        body["nameGlob"] = name_glob
    if session:
        body["session"] = session
    if fmt.lower() == "native":
        return Unary("ListTools", body, lambda m: [ToolSpec.from_json(t) for t in m.get("tools") or []],
                     timeout, "list tools", repeatable=True)
    return Unary("ListTools", body, lambda m: json.loads(m.get("toolsJson") or "[]"), timeout, "export tools", repeatable=True)


def get_tool_op(name: str, version: str, timeout: float) -> Unary:
    body = {"name": name}
    if version:
        body["version"] = version
    return Unary("GetTool", body, lambda m: ToolSpec.from_json(m.get("tool") or {}), timeout, "get tool " + name, repeatable=True)


def session_op(method: str, body: Dict[str, Any], timeout: float) -> Unary:
    return Unary(method, body, lambda m: Session.from_json(m.get("session") or {}), timeout,
                 method + " " + body.get("session", ""), repeatable=method == "GetSession")


def apply_intents_op(call_id: str, timeout: float) -> Unary:
    def decode(m: Dict[str, Any]) -> ApplyIntentsResult:
        return ApplyIntentsResult(session=Session.from_json(m.get("session") or {}), applied=int(m.get("applied", 0)),
                                  skipped=int(m.get("skipped", 0)),
                                  refused=[AppliedIntent.from_json(a) for a in m.get("refused") or []])
    return Unary("ApplyIntents", {"callId": call_id}, decode, timeout, "apply intents of " + call_id)


def list_approvals_op(state: str, tool: str, session: str, limit: int, timeout: float) -> Unary:
    body: Dict[str, Any] = {}
    if state:
        body["state"] = "APPROVAL_STATE_" + state.upper()
    if tool:
        body["tool"] = tool
    if session:
        body["session"] = session
    if limit:
        body["limit"] = limit
    return Unary("ListApprovals", body, lambda m: [Approval.from_json(a) for a in m.get("approvals") or []],
                 timeout, "list approvals", repeatable=True)


def get_approval_op(approval_id: str, timeout: float) -> Unary:
    return Unary("GetApproval", {"id": approval_id}, lambda m: Approval.from_json(m.get("approval") or {}),
                 timeout, "get approval " + approval_id, repeatable=True)


def approve_op(approval_id: str, scope: str, reason: str, args_pattern: Optional[Mapping[str, str]],
               ttl: Optional[float], tool: str, timeout: float) -> Unary:
    body: Dict[str, Any] = {"id": approval_id, "scope": "APPROVAL_SCOPE_" + scope.upper()}
    if reason:
        body["reason"] = reason
    if args_pattern:
        body["argsPattern"] = dict(args_pattern)
    if ttl:
        body["ttl"] = duration_json(ttl)
    if tool:
        body["tool"] = tool

    def decode(m: Dict[str, Any]) -> ApproveResult:
        return ApproveResult(approval=Approval.from_json(m.get("approval") or {}),
                             grant=Grant.from_json(m["grant"]) if m.get("grant") else None)
    return Unary("Approve", body, decode, timeout, "approve " + approval_id)


def deny_op(approval_id: str, reason: str, timeout: float) -> Unary:
    return Unary("Deny", {"id": approval_id, "reason": reason}, lambda m: Approval.from_json(m.get("approval") or {}),
                 timeout, "deny " + approval_id)


def list_grants_op(agent: str, session: str, timeout: float) -> Unary:
    body = {k: v for k, v in (("agent", agent), ("session", session)) if v}
    return Unary("ListGrants", body, lambda m: [Grant.from_json(g) for g in m.get("grants") or []],
                 timeout, "list grants", repeatable=True)


def revoke_grant_op(grant_id: str, timeout: float) -> Unary:
    return Unary("RevokeGrant", {"id": grant_id}, lambda m: bool(m.get("revoked")), timeout, "revoke grant " + grant_id)


def usage_op(agent: str, session: str, user: str, run: str, timeout: float) -> Unary:
    body = {k: v for k, v in (("agent", agent), ("session", session), ("user", user), ("run", run)) if v}

    def decode(m: Dict[str, Any]) -> Usage:
        return Usage(limits=[LimitUsage.from_json(u) for u in m.get("limits") or []],
                     policy_version=m.get("policyVersion", ""))
    return Unary("GetUsage", body, decode, timeout, "usage", repeatable=True)


# --- the wire ---------------------------------------------------------------

def check_api_key(api_key: Optional[str]) -> Optional[str]:
    """The API key, refused (ValueError, the key not shown) when it has a
    character a header value cannot carry: a control character such as the
    newline of a key read from a file, a space, or a non-ASCII one."""
    if api_key is not None and not (isinstance(api_key, str) and all("!" <= c <= "~" for c in api_key)):
        raise ValueError("toolwire: api_key has a character an HTTP header cannot carry (control character, "
                         "e.g. a trailing newline, space or non-ASCII); the key is not shown")
    return api_key


def headers(api_key: Optional[str], timeout: Optional[float], stream: bool) -> Dict[str, str]:
    """Request headers of an RPC; timeout (Connect-Timeout-Ms) is the
    deadline of the whole RPC, so a watch never sends one."""
    h = {"Content-Type": "application/connect+json" if stream else "application/json",
         "Connect-Protocol-Version": "1", "User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
    if api_key:
        h["Authorization"] = "Bearer " + api_key
    if timeout is not None:
        h["Connect-Timeout-Ms"] = str(max(int(timeout * 1000), 1))
    return h


def encode_json(body: Dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def decode_unary(u: Unary, status: int, ctype: str, body: bytes) -> Any:
    """The decoded answer of a unary RPC, or the error it raises."""
    if status != 200:
        raise error_of(u.op, status, body, u.not_found)
    try:
        msg = json.loads(body or b"{}")
    except _MALFORMED as e:
        raise TransportError(u.op, "internal", f"undecodable answer ({ctype}): {type(e).__name__}", status) from None
    if not isinstance(msg, dict):
        raise TransportError(u.op, "internal", "the answer is not a JSON object", status)
    try:
        return u.decode(msg)
    except _MALFORMED as e:
        raise TransportError(u.op, "internal", f"malformed answer: {type(e).__name__}", status) from None


def error_of(op: str, status: int, body: bytes, not_found: Optional[Callable[[TransportError], Exception]] = None
             ) -> Exception:
    """A Connect error body ({code, message, details}) as a TransportError."""
    code, message, details = _HTTP_CODES.get(status, "unknown"), f"HTTP {status}", []
    try:
        e = json.loads(body or b"{}")
        if isinstance(e, dict) and e.get("code"):
            code, message, details = str(e["code"]), str(e.get("message", "")), e.get("details") or []
            if not isinstance(details, list):
                details = []
    except _MALFORMED:
        pass
    return error_from(op, code, message, status, details, not_found)


def error_from(op: str, code: str, message: str, status: int, details: List[Any],
               not_found: Optional[Callable[[TransportError], Exception]]) -> Exception:
    err = TransportError(op, code, message, status, details)
    if code == "not_found" and not_found is not None:
        return not_found(err)
    return err


def frame(body: Dict[str, Any]) -> bytes:
    """One enveloped message of a Connect stream."""
    b = encode_json(body)
    return struct.pack(">BI", 0, len(b)) + b


def frame_header(h: bytes, op: str) -> Tuple[int, int]:
    """Flags and length of a stream frame's 5-byte header; a frame over
    MAX_MESSAGE_BYTES or compressed (never asked for) is refused."""
    flags, n = struct.unpack(">BI", h)
    if n > MAX_MESSAGE_BYTES:
        raise TransportError(op, "resource_exhausted", f"stream message of {n} bytes over the limit")
    if flags & _COMPRESSED:
        raise TransportError(op, "internal", "compressed stream message, never asked for")
    return flags, n


def stream_message(op: str, flags: int, payload: bytes, not_found: Optional[Callable[[TransportError], Exception]]
                   ) -> Optional[CallEvent]:
    """A Watch stream's frame as its CallEvent; None for the end of the
    stream without an error; raises the end-of-stream error."""
    try:
        msg = json.loads(payload or b"{}")
    except _MALFORMED as e:
        raise TransportError(op, "internal", f"undecodable stream message: {type(e).__name__}") from None
    if not isinstance(msg, dict):
        raise TransportError(op, "internal", "a stream message that is not a JSON object")
    if flags & _END_STREAM:
        err = msg.get("error")
        if not err:
            return None
        if not isinstance(err, dict):
            raise TransportError(op, "internal", "malformed end of stream")
        details = err.get("details") or []
        raise error_from(op, str(err.get("code", "unknown")), str(err.get("message", "")), 200,
                         details if isinstance(details, list) else [], not_found)
    ev = msg.get("event")
    if not ev:
        return CallEvent(call_id="", type="UNSPECIFIED")
    try:
        return CallEvent.from_json(ev)
    except _MALFORMED as e:
        raise TransportError(op, "internal", f"malformed stream message: {type(e).__name__}") from None


class Resume:
    """The state of a resumable watch: the keys of the events already
    yielded, so that a reconnected stream (which replays the call's events
    from its admission) yields only new ones. A key is kept as its SHA-256
    (32 bytes), so the state is bounded by cap whatever the events hold."""

    def __init__(self, after: Optional[List[CallEvent]] = None, cap: int = 100_000) -> None:
        self.seen: Dict[bytes, None] = {}
        self.cap = cap
        for e in after or []:
            self.mark(e)

    def fresh(self, ev: CallEvent) -> bool:
        return ev.type != "UNSPECIFIED" and self._key(ev) not in self.seen

    def mark(self, ev: CallEvent) -> None:
        if len(self.seen) >= self.cap:
            self.seen.pop(next(iter(self.seen)))
        self.seen[self._key(ev)] = None

    @staticmethod
    def _key(ev: CallEvent) -> bytes:
        return hashlib.sha256(ev.key().encode("utf-8", "surrogatepass")).digest()


def iter_frames(read_exactly: Callable[[int], bytes], op: str) -> Iterator[Tuple[int, bytes]]:
    """Frames of a sync stream, read with read_exactly (b"" at EOF)."""
    while True:
        h = read_exactly(5)
        if not h:
            return
        if len(h) < 5:
            raise TransportError(op, "unavailable", "stream cut inside a frame header")
        flags, n = frame_header(h, op)
        payload = read_exactly(n) if n else b""
        if len(payload) < n:
            raise TransportError(op, "unavailable", "stream cut inside a frame")
        yield flags, payload
