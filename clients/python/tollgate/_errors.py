"""The package's exceptions: one class per status code of tollgate.h that a caller tells apart."""


class Error(Exception):
    """A failure of the shared quota: `code` (tollgate.h's status code), `kind` (its name),
    `errno`, `retry_after` (seconds until the quota could admit, when a refusal names it, else
    None) and the message, which names the home's file or URL."""

    def __init__(self, message, code=0, kind="", errno=0, retry_after=None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.kind = kind
        self.errno = errno
        self.retry_after = retry_after


class Timeout(Error, TimeoutError):
    """No room before the timeout (nothing was taken)."""


class Refused(Error):
    """Refused before the timeout: the provider is paused, or the earliest admission lies beyond
    the timeout (`retry_after` says when)."""


class Cancelled(Error):
    """The wait was cancelled (Call.cancel from another thread, or an asyncio cancellation)."""


class UsageError(Error, ValueError):
    """An invalid argument: a negative count, an unknown provider, an empty name."""


class StateError(Error):
    """A call used out of turn: admitted twice, settled after it ended."""


class ClosedError(Error):
    """The home (of this call) was closed."""


class ForkedError(Error):
    """The home was opened by another process: after fork(), open it again in the child."""
