"""Tollgate in-process: the shared quota of a Tollgate home (a directory or redis://) from
Python, through libtollgate.so — the same core code as the `tollgate` CLI and `tollgate proxy`.

    import tollgate
    with tollgate.call("anthropic", caller="nightly", model="claude-sonnet-4-5",
                       input_tokens=1200, max_tokens=800, timeout=30) as call:
        answer = client.messages.create(...)
        call.settle(answer.usage)

`async with tollgate.call(...)` is the same in asyncio; `@tollgate.limited(...)` wraps a
function; `tollgate.httpx.Transport(provider)` puts an httpx client (the official Anthropic and
OpenAI SDKs') through the quota. Errors: tollgate.Timeout (a TimeoutError), tollgate.Refused,
tollgate.Error and its kinds; a wrong type is a TypeError, a bad value a UsageError (ValueError).

Threads: a Home is shared by any number of threads; a Call belongs to one at a time (another
thread's use meanwhile is a StateError; cancel() excepted). Home.close() lets uses under way
finish (the last frees the handle); later ones are ClosedError. Ctrl-C interrupts admit() in the
main thread: the wait is cancelled and the KeyboardInterrupt goes on.
fork(): the default home (home=None) is opened again in a child on its first use there; a Home
object opened before the fork answers ForkedError in the child (open a new one there).
"""

import asyncio
import functools
import os
import threading

from . import _lib
from ._core import Call, Home
from ._errors import (Cancelled, ClosedError, Error, ForkedError, Refused, StateError, Timeout,
                      UsageError)

__all__ = ["call", "limited", "status", "open_home", "Home", "Call", "Error", "Timeout", "Refused",
           "Cancelled", "UsageError", "StateError", "ClosedError", "ForkedError", "library_version"]

_default_lock = threading.Lock()
_default = {}  # (pid, home string, TOLLGATE_HOME) -> Home


def __getattr__(name):
    # `tollgate.httpx` without an import of its own (it imports httpx, which not every user has).
    if name == "httpx":
        import importlib
        return importlib.import_module(".httpx", __name__)
    raise AttributeError(f"module 'tollgate' has no attribute {name!r}")


def library_version():
    return _lib.lib.tollgate_version().decode()


def open_home(home=None):
    """A Home of this process for `home` (None: TOLLGATE_HOME, else the default home), kept and
    shared by the package's functions; opened again in a forked child."""
    if isinstance(home, Home):
        return home
    # The environment is part of the key: a changed TOLLGATE_HOME names another home.
    key = (os.getpid(), home, None if home is not None else os.environ.get("TOLLGATE_HOME"))
    with _default_lock:
        h = _default.get(key)
        if h is None:
            for k in [k for k in _default if k[0] != key[0]]:
                del _default[k]  # a parent's (freed without store work: the library knows)
            h = Home(home)
            _default[key] = h
        return h


def call(provider, *, caller=None, model=None, input_tokens=0, max_tokens=0, timeout=30, slot=True,
         home=None):
    """A call to `provider` stating its cost (its prompt's tokens, its max_tokens); used as a
    context manager it is admitted on entry (waiting up to `timeout` seconds)."""
    from ._core import _timeout_ms
    _timeout_ms(timeout)  # a bad timeout is refused here, not on entry
    c = open_home(home).call(provider, caller=caller, model=model, input_tokens=input_tokens,
                             max_tokens=max_tokens, slot=slot)
    c.timeout = timeout
    return c


def status(home=None):
    """The home's status, as `tollgate status --json` gives it."""
    return open_home(home).status()


def limited(provider, *, caller=None, model=None, input_tokens=0, max_tokens=0, timeout=30, slot=True,
            home=None):
    """A decorator: each call of the function is admitted first; what it returns settles the call
    (its `usage`, or its own usage fields; otherwise the estimate stands). Sync and async functions."""

    def settle_with(c, result):
        # What the function returned, if it says what the call used: an SDK answer (its
        # `usage`), a usage object or dict; anything else leaves the estimate standing.
        usage = getattr(result, "usage", None) if not isinstance(result, dict) else result.get("usage", result)
        if usage is None and hasattr(result, "input_tokens"):
            usage = result
        try:
            c.settle(usage)
        except TypeError:
            c.settle(None)

    def decorate(fn):
        def make():
            return call(provider, caller=caller, model=model, input_tokens=input_tokens,
                        max_tokens=max_tokens, timeout=timeout, slot=slot, home=home)

        if asyncio.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def run_async(*args, **kwargs):
                async with make() as c:
                    result = await fn(*args, **kwargs)
                    settle_with(c, result)
                    return result
            return run_async

        @functools.wraps(fn)
        def run(*args, **kwargs):
            with make() as c:
                result = fn(*args, **kwargs)
                settle_with(c, result)
                return result
        return run

    return decorate
