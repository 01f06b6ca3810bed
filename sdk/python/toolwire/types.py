"""Typed views of the API's messages, decoded from Connect's JSON.

Each dataclass keeps the message it was decoded from in ``raw`` (the
protobuf JSON object), so a field this version of the client does not
model is still there. Enum values are given by their short names
("DONE", "PROGRESS", "RATE_LIMIT"), durations as float seconds,
timestamps as timezone-aware ``datetime``s and JSON text fields also
decoded (``structured``, ``payload``, ``input_schema``).
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .errors import (ApprovalRequiredError, FieldViolation, ToolError,
                     tool_error_class)

__all__ = [
    "Content", "Intent", "ResponseMeta", "Result", "Submission", "CallEvent", "Session",
    "AppliedIntent", "ApplyIntentsResult", "Approval", "Grant", "ApproveResult", "ToolSpec",
    "LimitUsage", "Usage",
]

_DURATION = re.compile(r"^(-?)(\d+)(?:\.(\d{1,9}))?s$")
_TIMESTAMP = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$")


def duration(v: Any) -> Optional[float]:
    """A protobuf JSON Duration ("1.5s") as float seconds; None when unset."""
    if not isinstance(v, str):
        return None
    m = _DURATION.match(v)
    if not m:
        return None
    secs = int(m.group(2)) + (int((m.group(3) or "0").ljust(9, "0")) / 1e9)
    return -secs if m.group(1) else secs


def duration_json(seconds: float) -> str:
    """Float seconds as a protobuf JSON Duration."""
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        raise ValueError("toolwire: a duration must be a finite number of seconds")
    return f"{max(seconds, 0.0):.9f}".rstrip("0").rstrip(".") + "s"


def timestamp(v: Any) -> Optional[_dt.datetime]:
    """A protobuf JSON Timestamp (RFC 3339) as an aware datetime; None when unset."""
    if not isinstance(v, str):
        return None
    m = _TIMESTAMP.match(v)
    if not m:
        return None
    frac = (m.group(2) or "0")[:6].ljust(6, "0")
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    return _dt.datetime.fromisoformat(f"{m.group(1)}.{frac}{tz}")


def _json_text(v: Any) -> Any:
    if not isinstance(v, str) or v == "":
        return None
    try:
        return json.loads(v)
    except ValueError:
        return None


def _int(v: Any) -> int:
    try:
        return int(v or 0)
    except (TypeError, ValueError):
        return 0


def short(v: Any, prefix: str) -> str:
    """An enum's JSON name without its prefix ("CALL_STATE_DONE" -> "DONE")."""
    s = v if isinstance(v, str) else ""
    return s[len(prefix):] if s.startswith(prefix) else (s or "UNSPECIFIED")


def tool_error(e: Dict[str, Any], call_id: str = "", tool: str = "") -> ToolError:
    """The typed ToolError of an envelope's error object."""
    etype = short(e.get("type"), "ERROR_TYPE_")
    kwargs: Dict[str, Any] = dict(
        type=etype, retryable=bool(e.get("retryable")),
        side_effects=short(e.get("partialSideEffects"), "PARTIAL_SIDE_EFFECTS_"),
        suggestion=e.get("suggestion", ""), retry_after=duration(e.get("retryAfter")),
        violations=[FieldViolation(v.get("field", ""), v.get("message", "")) for v in e.get("violations") or []],
        call_id=call_id, tool=tool, raw=e)
    approval = e.get("approval")
    if etype == "CONFIRMATION_REQUIRED" and approval:
        err: ToolError = ApprovalRequiredError(e.get("message", ""), **kwargs)
        err.approval_id = approval.get("approvalId", "")
        err.token = approval.get("token", "")
        err.expires_at = timestamp(approval.get("expiresAt"))
        err.reason = e.get("message", "")
        return err
    return tool_error_class(etype)(e.get("message", ""), **kwargs)


@dataclass
class Content:
    """One content block: kind is "text", "image", "audio", "resource_link"
    or "resource" (MCP's kinds)."""

    kind: str
    text: str = ""
    data: bytes = b""
    mime_type: str = ""
    uri: str = ""
    name: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, c: Dict[str, Any]) -> "Content":
        for kind, key in (("text", "text"), ("image", "image"), ("audio", "audio"),
                          ("resource_link", "resourceLink"), ("resource", "resource")):
            v = c.get(key)
            if v is None:
                continue
            data = v.get("data") or v.get("blob") or ""
            return cls(kind=kind, text=v.get("text", ""), data=base64.b64decode(data) if data else b"",
                       mime_type=v.get("mimeType", ""), uri=v.get("uri", ""), name=v.get("name", ""), raw=c)
        return cls(kind="unknown", raw=c)


@dataclass
class Intent:
    """A state change the tool asks the orchestrator to make."""

    id: str
    type: str
    payload_json: str = ""
    payload: Any = None

    @classmethod
    def from_json(cls, i: Dict[str, Any]) -> "Intent":
        p = i.get("payloadJson", "")
        return cls(id=i.get("id", ""), type=i.get("type", ""), payload_json=p, payload=_json_text(p) or {})


@dataclass
class ResponseMeta:
    """How a response was produced."""

    worker: str = ""
    attempt: int = 0
    source: str = ""
    spec_version: str = ""
    session: str = ""
    duration: Optional[float] = None
    truncated: bool = False
    cancelled_by: str = ""
    cancel_reason: str = ""
    loop_count: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, m: Dict[str, Any]) -> "ResponseMeta":
        return cls(worker=m.get("worker", ""), attempt=_int(m.get("attempt")), source=m.get("source", ""),
                   spec_version=m.get("specVersion", ""), session=m.get("session", ""),
                   duration=duration(m.get("duration")), truncated=bool(m.get("truncated")),
                   cancelled_by=m.get("cancelledBy", ""), cancel_reason=m.get("cancelReason", ""),
                   loop_count=_int(m.get("loopCount")), raw=m)


@dataclass
class Result:
    """A call's terminal response (the envelope), which may be a tool error.

    ``ok`` is False when ``error`` holds the typed :class:`ToolError`;
    ``raise_for_error()`` raises it. ``text`` joins the text blocks.
    """

    call_id: str
    ok: bool
    tool: str = ""
    content: List[Content] = field(default_factory=list)
    structured_json: str = ""
    structured: Any = None
    error: Optional[ToolError] = None
    intents: List[Intent] = field(default_factory=list)
    meta: ResponseMeta = field(default_factory=ResponseMeta)
    #: The session after applying the intents (``apply_intents=True``).
    session: Optional["Session"] = None
    #: Why the intents could not be applied (``apply_intents=True``).
    apply_error: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, call_id: str, r: Dict[str, Any]) -> "Result":
        call_id = r.get("callId") or call_id
        tool = r.get("tool", "")
        ok = bool(r.get("ok"))
        err = None
        if not ok:
            err = tool_error(r.get("error") or {"type": "ERROR_TYPE_INTERNAL", "message":
                             "the response is not ok but carries no error",
                             "partialSideEffects": "PARTIAL_SIDE_EFFECTS_UNKNOWN"}, call_id, tool)
        sj = r.get("structuredJson", "")
        return cls(call_id=call_id, ok=ok, tool=tool,
                   content=[Content.from_json(c) for c in r.get("content") or []],
                   structured_json=sj, structured=_json_text(sj), error=err,
                   intents=[Intent.from_json(i) for i in r.get("intents") or []],
                   meta=ResponseMeta.from_json(r.get("meta") or {}), raw=r)

    @property
    def text(self) -> str:
        """The text blocks joined by newlines (the structured JSON when there
        is none; the error's message for a failed call)."""
        texts = [c.text for c in self.content if c.kind == "text"]
        if texts:
            return "\n".join(texts)
        if self.error is not None:
            return str(self.error)
        return self.structured_json

    def raise_for_error(self) -> "Result":
        """Raise the call's ToolError, if it failed; return self otherwise."""
        if self.error is not None:
            raise self.error
        return self


@dataclass
class Submission:
    """What ``submit`` answered."""

    call_id: str
    #: The idempotency key matched an earlier call; nothing new was queued.
    duplicate: bool = False
    #: The calls stream had not yet acknowledged the call (it may run).
    unconfirmed: bool = False
    #: The terminal response, when the call was refused at admission or is
    #: a duplicate of a finished call.
    result: Optional[Result] = None
    #: Set when the call is parked for an approver.
    approval: Optional[ApprovalRequiredError] = None
    state: str = "PENDING"


@dataclass
class CallEvent:
    """A lifecycle or progress event of a call (what ``watch`` yields).

    ``type`` is "ACCEPTED", "STARTED", "PROGRESS", "RETRYING",
    "CANCEL_REQUESTED", "FINISHED", "REJECTED", "AWAITING_APPROVAL",
    "APPROVED", "APPROVAL_DENIED", "APPROVAL_EXPIRED",
    "LATENCY_BUDGET_EXCEEDED" or "DEAD_LETTER_PURGED".
    """

    call_id: str
    type: str
    time: Optional[_dt.datetime] = None
    attempt: int = 0
    worker: str = ""
    message: str = ""
    percent: Optional[float] = None
    partial: List[Content] = field(default_factory=list)
    error: Optional[ToolError] = None
    retry_delay: Optional[float] = None
    tool: str = ""
    #: The terminal response, on FINISHED (the rejection, on REJECTED).
    result: Optional[Result] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def terminal(self) -> bool:
        """FINISHED or REJECTED: the last event of a call."""
        return self.type in ("FINISHED", "REJECTED")

    @classmethod
    def from_json(cls, e: Dict[str, Any]) -> "CallEvent":
        call_id, etype, tool = e.get("callId", ""), short(e.get("type"), "CALL_EVENT_TYPE_"), e.get("tool", "")
        err = tool_error(e["error"], call_id, tool) if e.get("error") else None
        result = None
        if etype == "FINISHED" and e.get("response"):
            result = Result.from_json(call_id, e["response"])
        elif etype == "REJECTED":
            result = Result(call_id=call_id, ok=False, tool=tool, error=err,
                            meta=ResponseMeta(source="dispatcher"))
        pct = e.get("percent")
        return cls(call_id=call_id, type=etype, time=timestamp(e.get("time")), attempt=_int(e.get("attempt")),
                   worker=e.get("worker", ""), message=e.get("message", ""),
                   percent=float(pct) if isinstance(pct, (int, float)) else None,
                   partial=[Content.from_json(c) for c in e.get("partial") or []], error=err,
                   retry_delay=duration(e.get("retryDelay")), tool=tool, result=result, raw=e)

    def key(self) -> str:
        """Identifies the event among its call's events (watch resumes by it).
        A call has one terminal event, which the dispatcher may build anew
        (with a new time) for each watch: its key is its type."""
        if self.terminal:
            return self.type
        r = self.raw
        return "|".join(str(r.get(k, "")) for k in ("type", "time", "attempt", "worker", "message", "percent"))


@dataclass
class AppliedIntent:
    """An intent the reference applier applied, or refused (``refused`` says why)."""

    call_id: str
    intent_id: str
    type: str
    payload_json: str = ""
    refused: str = ""
    applied_at: Optional[_dt.datetime] = None

    @classmethod
    def from_json(cls, a: Dict[str, Any]) -> "AppliedIntent":
        return cls(call_id=a.get("callId", ""), intent_id=a.get("intentId", ""), type=a.get("type", ""),
                   payload_json=a.get("payloadJson", ""), refused=a.get("refused", ""),
                   applied_at=timestamp(a.get("appliedAt")))


@dataclass
class Session:
    """The state the dispatcher's reference applier keeps for a session."""

    session: str
    tenant: str = ""
    #: SET_STATE values by key, decoded from JSON.
    state: Dict[str, Any] = field(default_factory=dict)
    ended: bool = False
    end_reason: str = ""
    suppress_audio: bool = False
    suppress_transcript: bool = False
    pending_message: str = ""
    mode: str = ""
    revision: int = 0
    pinned_versions: Dict[str, str] = field(default_factory=dict)
    log: List[AppliedIntent] = field(default_factory=list)
    updated_at: Optional[_dt.datetime] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, s: Dict[str, Any]) -> "Session":
        state = {k: _json_text(v) for k, v in (s.get("stateJson") or {}).items()}
        return cls(session=s.get("session", ""), tenant=s.get("tenant", ""), state=state,
                   ended=bool(s.get("ended")), end_reason=s.get("endReason", ""),
                   suppress_audio=bool(s.get("suppressAudio")), suppress_transcript=bool(s.get("suppressTranscript")),
                   pending_message=s.get("pendingMessage", ""), mode=s.get("mode", ""),
                   revision=_int(s.get("revision")), pinned_versions=dict(s.get("pinnedVersions") or {}),
                   log=[AppliedIntent.from_json(a) for a in s.get("log") or []],
                   updated_at=timestamp(s.get("updatedAt")), raw=s)


@dataclass
class ApplyIntentsResult:
    """What ``apply_intents`` did: intents applied now, skipped (applied
    before) and refused (each with its reason)."""

    session: Session
    applied: int = 0
    skipped: int = 0
    refused: List[AppliedIntent] = field(default_factory=list)


@dataclass
class Approval:
    """A parked call's approval. ``state``: PENDING, APPROVED, DENIED, EXPIRED."""

    id: str
    state: str
    tool: str = ""
    spec_version: str = ""
    arguments_json: str = ""
    arguments: Any = None
    agent: str = ""
    session: str = ""
    reason: str = ""
    approver: str = ""
    scope: str = ""
    grant_id: str = ""
    created_at: Optional[_dt.datetime] = None
    expires_at: Optional[_dt.datetime] = None
    decided_at: Optional[_dt.datetime] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, a: Dict[str, Any]) -> "Approval":
        caller = a.get("caller") or {}
        aj = a.get("argumentsJson", "")
        return cls(id=a.get("id", ""), state=short(a.get("state"), "APPROVAL_STATE_"), tool=a.get("tool", ""),
                   spec_version=a.get("specVersion", ""), arguments_json=aj, arguments=_json_text(aj),
                   agent=caller.get("agent", ""), session=caller.get("session", ""), reason=a.get("reason", ""),
                   approver=a.get("approver", ""), scope=short(a.get("scope"), "APPROVAL_SCOPE_"),
                   grant_id=a.get("grantId", ""), created_at=timestamp(a.get("createdAt")),
                   expires_at=timestamp(a.get("expiresAt")), decided_at=timestamp(a.get("decidedAt")), raw=a)


@dataclass
class Grant:
    """A standing grant an approval made for a session, agent or tenant."""

    id: str
    layer: str = ""
    agent: str = ""
    session: str = ""
    tool: str = ""
    args: Dict[str, str] = field(default_factory=dict)
    expires_at: Optional[_dt.datetime] = None
    approval_id: str = ""
    approver: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, g: Dict[str, Any]) -> "Grant":
        return cls(id=g.get("id", ""), layer=g.get("layer", ""), agent=g.get("agent", ""),
                   session=g.get("session", ""), tool=g.get("tool", ""), args=dict(g.get("args") or {}),
                   expires_at=timestamp(g.get("expiresAt")), approval_id=g.get("approvalId", ""),
                   approver=g.get("approver", ""), raw=g)


@dataclass
class ApproveResult:
    """What ``approve`` answered: the approval, and the grant for a
    session, agent or tenant scope."""

    approval: Approval
    grant: Optional[Grant] = None


@dataclass
class ToolSpec:
    """A tool as the registry describes it (the native format)."""

    name: str
    title: str = ""
    description: str = ""
    summary: str = ""
    version: str = ""
    executor: str = ""
    category: str = ""
    input_schema: Any = None
    output_schema: Any = None
    scopes: List[str] = field(default_factory=list)
    intents: List[str] = field(default_factory=list)
    requires_approval: bool = False
    annotations: Dict[str, bool] = field(default_factory=dict)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, t: Dict[str, Any]) -> "ToolSpec":
        return cls(name=t.get("name", ""), title=t.get("title", ""), description=t.get("description", ""),
                   summary=t.get("summary", ""), version=t.get("version", ""),
                   executor=short(t.get("executor"), "EXECUTOR_TYPE_"),
                   category=short(t.get("category"), "TOOL_CATEGORY_"),
                   input_schema=_json_text(t.get("inputSchemaJson")),
                   output_schema=_json_text(t.get("outputSchemaJson")), scopes=list(t.get("scopes") or []),
                   intents=list(t.get("intents") or []), requires_approval=bool(t.get("requiresApproval")),
                   annotations=dict(t.get("annotations") or {}), raw=t)


@dataclass
class LimitUsage:
    """One limit of the policy in force, as it stands for one key."""

    limit: str
    key: str = ""
    value: str = ""
    reason: str = ""
    rate_count: int = 0
    rate_per: Optional[float] = None
    rate_burst: int = 0
    concurrency: int = 0
    in_flight: int = 0
    budget_units: int = 0
    budget_window: Optional[float] = None
    used: int = 0
    remaining: int = 0
    reset_at: Optional[_dt.datetime] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, u: Dict[str, Any]) -> "LimitUsage":
        return cls(limit=u.get("limit", ""), key=u.get("key", ""), value=u.get("value", ""),
                   reason=u.get("reason", ""), rate_count=_int(u.get("rateCount")),
                   rate_per=duration(u.get("ratePer")), rate_burst=_int(u.get("rateBurst")),
                   concurrency=_int(u.get("concurrency")), in_flight=_int(u.get("inFlight")),
                   budget_units=_int(u.get("budgetUnits")), budget_window=duration(u.get("budgetWindow")),
                   used=_int(u.get("used")), remaining=_int(u.get("remaining")),
                   reset_at=timestamp(u.get("resetAt")), raw=u)


@dataclass
class Usage:
    """The limits in force for a key, and the policy version they are from."""

    limits: List[LimitUsage] = field(default_factory=list)
    policy_version: str = ""
