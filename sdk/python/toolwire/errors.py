"""Errors of the toolwire client.

Two kinds of failure are kept apart, as in the Go and TypeScript SDKs:

* A **tool error** is an answer: the call reached the fabric and its
  terminal response says it failed (refused at admission: VALIDATION,
  PERMISSION_DENIED, RATE_LIMIT, ...; or failed in a worker: TIMEOUT,
  TRANSIENT, CANCELLED, ...). It is a :class:`ToolError` subclass chosen by
  the envelope's error type, carrying its retryability, partial side
  effects and ``retry_after``. ``Result.error`` holds it and
  ``Result.raise_for_error()`` raises it.
* A **transport error** (:class:`TransportError`) means there is no answer:
  the dispatcher could not be reached, refused the credentials, or the
  request timed out. Whether a call was admitted is then unknown; give
  calls an idempotency key to retry them safely.

A call with no terminal response yet raises a :class:`StateError`
(:class:`PendingError` or :class:`UnknownCallError`); a call parked for an
approver raises :class:`ApprovalRequiredError`.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Dict, List, Optional, Type

__all__ = [
    "ToolwireError", "TransportError", "StateError", "PendingError", "UnknownCallError",
    "WatchEndedError", "ToolError", "ValidationError", "NotFoundError", "PermissionDeniedError",
    "ConfirmationRequiredError", "ApprovalRequiredError", "ModeRestrictedError",
    "BudgetExceededError", "RateLimitError", "OverloadedError", "ConflictError",
    "SessionInactiveError", "AuthError", "ToolTimeoutError", "ExpiredError", "CallCancelledError",
    "TransientError", "PermanentError", "MaxAttemptsError", "UnknownOutcomeError",
    "InternalError", "FieldViolation", "tool_error_class",
]


class ToolwireError(Exception):
    """Base class of every error this package raises."""


class TransportError(ToolwireError):
    """No answer: the request failed below the tool call.

    ``code`` is the Connect error code ("unavailable", "unauthenticated",
    "deadline_exceeded", "invalid_argument", "not_found", ...), or
    "unavailable" when the dispatcher could not be reached at all.
    """

    def __init__(self, op: str, code: str, message: str, http_status: int = 0,
                 details: Optional[List[Any]] = None) -> None:
        super().__init__(f"toolwire: {op}: {code}: {message}")
        self.op = op
        self.code = code
        self.message = message
        self.http_status = http_status
        self.details = details or []


class StateError(ToolwireError):
    """The call has no terminal response to return (pending or unknown)."""

    state = "CALL_STATE_UNSPECIFIED"

    def __init__(self, call_id: str, unconfirmed: bool = False) -> None:
        super().__init__(f"toolwire: call {call_id} is {self.state.rsplit('_', 1)[-1].lower()}")
        self.call_id = call_id
        #: Set with PENDING when the calls stream had not acknowledged the
        #: call yet: it may run; do not submit it again without the same
        #: idempotency key.
        self.unconfirmed = unconfirmed


class PendingError(StateError):
    """Accepted, no terminal response yet; fetch it with ``get_result``."""

    state = "CALL_STATE_PENDING"


class UnknownCallError(StateError):
    """No call of this id in the caller's tenant (or its records are gone)."""

    state = "CALL_STATE_UNKNOWN"


class WatchEndedError(ToolwireError):
    """The stream ended before the call's terminal event, and resuming it
    failed as many times as allowed. The call itself is unaffected."""

    def __init__(self, call_id: str, cause: Optional[BaseException] = None) -> None:
        super().__init__(f"toolwire: watch {call_id} ended before the call finished"
                         + (f": {cause}" if cause else ""))
        self.call_id = call_id
        self.cause = cause  #: the failure of the last attempt, if any


class FieldViolation:
    """One offending field of a VALIDATION error: a JSON Pointer and why."""

    __slots__ = ("field", "message")

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message

    def __repr__(self) -> str:
        return f"FieldViolation(field={self.field!r}, message={self.message!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FieldViolation) and (self.field, self.message) == (other.field, other.message)


class ToolError(ToolwireError):
    """A tool call's failure as its terminal response reports it.

    Attributes:
        type: the short error type, e.g. "VALIDATION", "RATE_LIMIT".
        message: what went wrong (for VALIDATION it names the field).
        retryable: the same call may succeed later; never for errors
            raised before execution.
        side_effects: "NONE", "POSSIBLE" or "UNKNOWN": what the failed call
            may have changed.
        suggestion: what the caller or the model could do instead.
        retry_after: seconds until the earliest sensible retry (RATE_LIMIT,
            BUDGET_EXCEEDED, OVERLOADED), or None.
        violations: the offending fields of a VALIDATION error.
        call_id, tool: the call.
        raw: the envelope's error object as JSON.
    """

    type = "UNSPECIFIED"

    def __init__(self, message: str = "", *, type: Optional[str] = None, retryable: bool = False,
                 side_effects: str = "UNSPECIFIED", suggestion: str = "",
                 retry_after: Optional[float] = None, violations: Optional[List[FieldViolation]] = None,
                 call_id: str = "", tool: str = "", raw: Optional[Dict[str, Any]] = None) -> None:
        if type is not None:
            self.type = type
        self.message = message
        self.retryable = retryable
        self.side_effects = side_effects
        self.suggestion = suggestion
        self.retry_after = retry_after
        self.violations = violations or []
        self.call_id = call_id
        self.tool = tool
        self.raw = raw or {}
        super().__init__(self._text())

    def _text(self) -> str:
        parts = ["toolwire: "]
        if self.tool:
            parts.append(self.tool + ": ")
        parts.append(self.type)
        if self.message:
            parts.append(": " + self.message)
        return "".join(parts)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(type={self.type!r}, message={self.message!r}, "
                f"retryable={self.retryable!r}, side_effects={self.side_effects!r}, "
                f"retry_after={self.retry_after!r})")


class ValidationError(ToolError):
    type = "VALIDATION"


class NotFoundError(ToolError):
    type = "NOT_FOUND"


class PermissionDeniedError(ToolError):
    type = "PERMISSION_DENIED"


class ConfirmationRequiredError(ToolError):
    """CONFIRMATION_REQUIRED: the call waits for an approval, or the
    approval token it presented does not cover it."""

    type = "CONFIRMATION_REQUIRED"


class ApprovalRequiredError(ConfirmationRequiredError):
    """The policy asked for approval and the call is parked for an approver.

    ``approval_id`` (the call's id) is what an approver approves; ``token``
    is set for a caller with the "confirm" scope when the dispatchers hold
    token keys: after the orchestrator's own user confirmed, the same call
    sent again with ``approval_token=token`` runs as the parked one, once.
    """

    approval_id: str
    token: str
    expires_at: Optional[_dt.datetime]
    reason: str


class ModeRestrictedError(ToolError):
    type = "MODE_RESTRICTED"


class BudgetExceededError(ToolError):
    type = "BUDGET_EXCEEDED"


class RateLimitError(ToolError):
    type = "RATE_LIMIT"


class OverloadedError(ToolError):
    type = "OVERLOADED"


class ConflictError(ToolError):
    type = "CONFLICT"


class SessionInactiveError(ToolError):
    type = "SESSION_INACTIVE"


class AuthError(ToolError):
    type = "AUTH"


class ToolTimeoutError(ToolError):
    type = "TIMEOUT"


class ExpiredError(ToolError):
    type = "EXPIRED"


class CallCancelledError(ToolError):
    type = "CANCELLED"


class TransientError(ToolError):
    type = "TRANSIENT"


class PermanentError(ToolError):
    type = "PERMANENT"


class MaxAttemptsError(ToolError):
    type = "MAX_ATTEMPTS"


class UnknownOutcomeError(ToolError):
    type = "UNKNOWN_OUTCOME"


class InternalError(ToolError):
    type = "INTERNAL"


_BY_TYPE: Dict[str, Type[ToolError]] = {
    c.type: c for c in (
        ValidationError, NotFoundError, PermissionDeniedError, ConfirmationRequiredError,
        ModeRestrictedError, BudgetExceededError, RateLimitError, OverloadedError, ConflictError,
        SessionInactiveError, AuthError, ToolTimeoutError, ExpiredError, CallCancelledError,
        TransientError, PermanentError, MaxAttemptsError, UnknownOutcomeError, InternalError)
}


def tool_error_class(error_type: str) -> Type[ToolError]:
    """The ToolError subclass of a short error type ("RATE_LIMIT"); ToolError
    itself for a type this version does not know."""
    return _BY_TYPE.get(error_type, ToolError)
