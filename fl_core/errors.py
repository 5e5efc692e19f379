"""Errors of the federated core. Each names the client or field at fault; an operation that
raises leaves the state it was called on unchanged."""


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
    """An upload is malformed: NaN/Inf, wrong shape, or not the contribution on record."""


class CorruptFileError(ValueError):
    """A file read back from disk is not what was written (tampered, truncated or unreadable)."""
