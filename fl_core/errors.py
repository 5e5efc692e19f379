"""Errors of the federated core. Each names the client or field at fault; an operation that
raises leaves the state it was called on unchanged."""

from collections.abc import Hashable


class EditError(ValueError):
    """A request the editor cannot apply (state is left as it was)."""


class UnknownClientError(EditError, KeyError):
    """A removal names a client that is not in the current client set."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the plain message
        return str(self.args[0]) if self.args else ""


class DuplicateClientError(EditError):
    """An addition names a client that is already in the current client set."""


class EmptyPopulationError(EditError):
    """The request would leave no client (or fewer clients than the subset size)."""


class InvalidContributionError(ValueError):
    """An upload is malformed: NaN/Inf, wrong shape or dtype, or not the contribution on record.

    ``client`` is set when the fault is the uploading client's own (its fresh upload is unusable):
    editors then quarantine that client instead of failing the request that drew it."""

    def __init__(self, message: str, client: Hashable | None = None) -> None:
        super().__init__(message)
        self.client = client


class UploadLostError(Exception):
    """A client's upload never reached the coordinator (its reply was lost on the way): a pool
    raises it from ``train`` so that an editor that can take the client out (the F-SOSA family)
    keeps the client as a member without a contribution until it is removed."""

    def __init__(self, client: Hashable, reason: str = "lost") -> None:
        super().__init__(f"client {client!r}: its upload never arrived ({reason})")
        self.client, self.reason = client, reason


class CorruptFileError(ValueError):
    """A file read back from disk is not what was written (tampered, truncated or unreadable)."""
