"""Error vocabulary of the protocol: every failure a client sees has a code, a message saying
what is wrong and where, and whether retrying the same request can succeed."""

from __future__ import annotations


class BridgeError(Exception):
    """A failure reported to the client as `{code, message, retryable}`."""

    def __init__(self, code: str, message: str, retryable: bool = False):
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable

    def to_json(self) -> dict:
        return {"code": self.code, "message": self.message, "retryable": self.retryable}


def bad_request(message: str) -> BridgeError:
    return BridgeError("bad_request", message)


def not_found(message: str) -> BridgeError:
    return BridgeError("not_found", message)
