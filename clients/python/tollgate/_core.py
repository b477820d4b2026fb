"""Home and Call: the C library's handles, as Python objects.

A Home is shared by any number of threads; a Call is used by one thread at a time (cancel
excepted). The C call is freed when the Call object is (not when it ends), so a Call used
after its end answers StateError rather than touching freed memory; a Home closed by hand
refuses everything with ClosedError, and its calls answer ClosedError from the library.

Invariants (the C API's rules, kept here so that a misuse from Python is an error, not a crash):
- A Call's C handle is used by one thread at a time: every use but cancel() holds the call's
  guard (a lock taken without waiting); a second thread gets StateError.
- A Home's C handle is freed only when no thread uses it: each use holds a count; close() marks
  the home closed (new uses: ClosedError) and the last use to end frees it.
- admit() in the main thread waits in a helper thread (the main one waits for it in slices), so
  that a signal (Ctrl-C) interrupts the wait: the call is cancelled, the wait ends (the guard
  is given back), and the exception goes on.
"""

import contextlib
import ctypes
import json
import math
import os
import threading

from . import _lib
from ._errors import (Cancelled, ClosedError, Error, ForkedError, Refused, StateError, Timeout,
                      UsageError)

_CLASSES = {
    _lib.E_TIMEOUT: Timeout,
    _lib.E_REFUSED: Refused,
    _lib.E_CANCELLED: Cancelled,
    _lib.E_USAGE: UsageError,
    _lib.E_STATE: StateError,
    _lib.E_CLOSED: ClosedError,
    _lib.E_FORKED: ForkedError,
}


# A provider's Retry-After is told, not trusted: at most a day (as the proxy and the CLI cap
# it); a value that is no time (nan, negative, garbage) is left out, so the 429 still backs
# everyone off by the usual doubling.
_MAX_RETRY_AFTER_S = 24 * 3600.0


def _retry_after_seconds(value):
    """Seconds from a Retry-After header value (delta-seconds or an HTTP date), or None."""
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except (ValueError, OverflowError):
        seconds = None
    if seconds is None:
        import email.utils
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when is None:
            return None
        import datetime
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.timezone.utc)
        seconds = (when - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
        return min(max(seconds, 0.0), _MAX_RETRY_AFTER_S)
    if math.isnan(seconds) or seconds < 0:
        return None
    return min(seconds, _MAX_RETRY_AFTER_S)


def _raise(rc, err):
    kind = _lib.lib.tollgate_status_name(rc).decode()
    retry = err.retry_after_ms / 1000.0 if err.retry_after_ms >= 0 else None
    message = err.message.decode("utf-8", "replace")
    raise _CLASSES.get(rc, Error)(message, code=rc, kind=kind, errno=err.sys_errno, retry_after=retry)


def _check(rc, err):
    if rc != _lib.OK:
        _raise(rc, err)


def _text(name, value, required=False):
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise TypeError(f"tollgate: {name} must be a str, not {type(value).__name__}")
    if required and not value:
        raise UsageError(f"tollgate: {name} is empty", code=_lib.E_USAGE, kind="usage")
    if "\0" in value:
        raise UsageError(f"tollgate: {name} holds a NUL character", code=_lib.E_USAGE, kind="usage")
    return value.encode("utf-8", "surrogateescape")


def _count(name, value, allow_unknown=False):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"tollgate: {name} must be an int, not {type(value).__name__}")
    low = -1 if allow_unknown else 0
    if value < low or value > _lib.INT64_MAX:
        raise UsageError(f"tollgate: {name} out of range ({value})", code=_lib.E_USAGE, kind="usage")
    return value


def _timeout_ms(timeout):
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"tollgate: timeout must be seconds (int or float), not {type(timeout).__name__}")
    if math.isnan(timeout) or timeout < 0:
        raise UsageError(f"tollgate: timeout must be 0 or more seconds ({timeout})", code=_lib.E_USAGE,
                         kind="usage")
    return int(min(timeout * 1000.0, 365 * 24 * 3600 * 1000.0))


_SIGNAL_SLICE = 0.1  # seconds: how late a signal may interrupt a wait in admit() at most


class Home:
    """An open Tollgate home: a directory or redis://... (None: TOLLGATE_HOME, else the default)."""

    def __init__(self, home=None):
        where = _text("home", home) if home is not None else None
        handle = ctypes.c_void_p()
        err = _lib.ErrorStruct()
        _check(_lib.lib.tollgate_home_open(where, ctypes.byref(handle), ctypes.byref(err)), err)
        self._handle = handle
        self._lock = threading.Lock()  # guards _handle, _uses, _closed
        self._uses = 0  # threads inside a C function with _handle
        self._closed = False
        self.pid = os.getpid()
        self.text = _lib.lib.tollgate_home_text(handle).decode("utf-8", "replace")

    @contextlib.contextmanager
    def _use(self):
        """The C handle, kept from being freed until the block ends."""
        with self._lock:
            if self._closed:
                raise ClosedError(f"{self.text}: the home was closed", code=_lib.E_CLOSED, kind="closed")
            self._uses += 1
            handle = self._handle
        try:
            yield handle
        finally:
            with self._lock:
                self._uses -= 1
                last = self._closed and self._uses == 0
                handle, self._handle = (self._handle, None) if last else (None, self._handle)
            if handle is not None:
                _lib.lib.tollgate_home_close(handle)

    def close(self):
        """Closes the home: uses from now on are ClosedError; one under way (in another thread)
        finishes first, and the last to end frees the handle."""
        with self._lock:
            self._closed = True
            handle = None
            if self._uses == 0:
                handle, self._handle = self._handle, None
        if handle is not None:
            _lib.lib.tollgate_home_close(handle)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def status(self):
        """The status as `tollgate status --json` gives it, as a dict."""
        out = ctypes.c_void_p()
        err = _lib.ErrorStruct()
        with self._use() as handle:
            _check(_lib.lib.tollgate_status_json(handle, ctypes.byref(out), ctypes.byref(err)), err)
        try:
            return json.loads(ctypes.string_at(out).decode("utf-8", "replace"))
        finally:
            _lib.lib.tollgate_string_free(out)

    def call(self, provider, *, caller=None, model=None, input_tokens=0, max_tokens=0, slot=True):
        """A call that states its cost (not admitted yet: Call.admit, or use it as a context)."""
        p = _text("provider", provider, required=True)
        c = _text("caller", caller)
        m = _text("model", model)
        i = _count("input_tokens", input_tokens)
        o = _count("max_tokens", max_tokens)
        handle = ctypes.c_void_p()
        err = _lib.ErrorStruct()
        with self._use() as home:
            _check(_lib.lib.tollgate_call_new(home, p, c, m, i, o, _lib.SLOT if slot else 0,
                                              ctypes.byref(handle), ctypes.byref(err)), err)
        return Call(self, handle)

    def http_call(self, provider, body, *, caller=None):
        """A call estimated from an HTTP request's JSON body, as `tollgate proxy` estimates it."""
        p = _text("provider", provider, required=True)
        c = _text("caller", caller)
        if not isinstance(body, (bytes, bytearray, memoryview)):
            raise TypeError(f"tollgate: body must be bytes, not {type(body).__name__}")
        data = bytes(body)
        handle = ctypes.c_void_p()
        err = _lib.ErrorStruct()
        with self._use() as home:
            _check(_lib.lib.tollgate_call_new_http(home, p, c, data, len(data), ctypes.byref(handle),
                                                   ctypes.byref(err)), err)
        return Call(self, handle)


def _usage_counts(usage):
    """(input, output) from a usage: None (not known), a dict or an object with Anthropic's
    (input_tokens, output_tokens, cache_creation_input_tokens) or OpenAI's (prompt_tokens,
    completion_tokens) fields, or a response that has such a `usage`."""
    if usage is None:
        return -1, -1
    if not isinstance(usage, dict) and hasattr(usage, "usage") and not hasattr(usage, "input_tokens") \
            and not hasattr(usage, "prompt_tokens"):
        return _usage_counts(usage.usage)

    def get(name):
        value = usage.get(name) if isinstance(usage, dict) else getattr(usage, name, None)
        return None if value is None else _count(name, value)

    inp, out = get("input_tokens"), get("output_tokens")
    if inp is None and out is None:
        inp, out = get("prompt_tokens"), get("completion_tokens")
    if inp is None or out is None:
        raise TypeError("tollgate: a usage needs input_tokens and output_tokens (or prompt_tokens and "
                        f"completion_tokens); got {type(usage).__name__}")
    created = get("cache_creation_input_tokens") or 0
    if inp + created > _lib.INT64_MAX:  # ctypes would wrap the sum to a negative count
        raise UsageError("tollgate: input_tokens + cache_creation_input_tokens out of range "
                         f"({inp} + {created})", code=_lib.E_USAGE, kind="usage")
    return inp + created, out


class Call:
    """One call: admit, then settle (the real usage), report_429, or release. As a context
    manager (`with` or `async with`): admitted on entry; on exit, settled as a success with the
    estimate when nothing ended it, released when the block raised (a 429 from the SDK,
    status_code 429, is reported with its Retry-After)."""

    def __init__(self, home, handle, timeout=30):
        self._home = home  # keeps the Home (and its handle) alive while the call is
        self._handle = handle
        self._busy = threading.Lock()  # held by the thread in a C function of the call (not cancel)
        self.timeout = timeout

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle is not None:
            try:
                _lib.lib.tollgate_call_free(handle)
            except Exception:
                pass  # at interpreter exit the module may be gone: the process ends anyway

    def _take(self, what):
        """The call's guard, for `what` (it is given back by whoever ends the use)."""
        if not self._busy.acquire(blocking=False):
            raise StateError(f"tollgate: {what} of a call that another thread is using (a call is used by "
                             "one thread at a time; cancel excepted)", code=_lib.E_STATE, kind="state")

    @contextlib.contextmanager
    def _using(self, what):
        self._take(what)
        try:
            yield self._handle
        finally:
            self._busy.release()

    def _run(self, fn, *args):
        err = _lib.ErrorStruct()
        with self._using(fn.__name__.replace("tollgate_call_", "")) as handle:
            rc = fn(handle, *args, ctypes.byref(err))
        _check(rc, err)

    @property
    def fence(self):
        with self._using("fence") as handle:
            return _lib.lib.tollgate_call_fence(handle)

    @property
    def holds_slot(self):
        with self._using("holds_slot") as handle:
            return bool(_lib.lib.tollgate_call_holds_slot(handle))

    @property
    def waited(self):
        """Seconds it waited for admission."""
        with self._using("waited") as handle:
            return _lib.lib.tollgate_call_waited_ms(handle) / 1000.0

    @property
    def tokens(self):
        with self._using("tokens") as handle:
            return _lib.lib.tollgate_call_tokens(handle)

    def _wait_in_thread(self, ms, then):
        """tollgate_call_admit in a thread of its own, with the guard its caller took: the thread
        gives it back when the wait ends, then calls then(error) (None: admitted). Returns the
        thread (to start) and abandon(): for an interrupt that came before the wait began, True
        when it will never begin (the guard is given back); False when it runs (then() will come)."""
        claim = threading.Lock()
        state = ["pending"]

        def wait():
            with claim:
                if state[0] == "abandoned":
                    return
                state[0] = "running"
            error = None
            try:
                err = _lib.ErrorStruct()
                _check(_lib.lib.tollgate_call_admit(self._handle, ms, ctypes.byref(err)), err)
            except BaseException as e:  # handed to the waiting side
                error = e
            finally:
                self._busy.release()
            then(error)

        def abandon():
            with claim:
                if state[0] != "pending":
                    return False
                state[0] = "abandoned"
            self._busy.release()
            return True

        return threading.Thread(target=wait, name="tollgate-admit", daemon=True), abandon

    def admit(self, timeout=None):
        """Waits for room, `timeout` seconds at most (default: the call's; 0: a try). In the main
        thread the wait is interruptible: a signal's exception (Ctrl-C's KeyboardInterrupt)
        cancels it, and goes on once the wait has ended."""
        ms = _timeout_ms(self.timeout if timeout is None else timeout)
        if ms == 0 or threading.current_thread() is not threading.main_thread():
            self._run(_lib.lib.tollgate_call_admit, ms)  # only the main thread gets signals
            return self
        finished = threading.Event()
        outcome = []

        def then(error):
            outcome.append(error)
            finished.set()

        self._take("admit")
        thread, abandon = self._wait_in_thread(ms, then)
        try:
            thread.start()
            # In slices: a signal the kernel gives another thread (the waiting one) does not
            # interrupt this wait; its handler's exception comes when the slice ends.
            while not finished.wait(_SIGNAL_SLICE):
                pass
        except BaseException:
            if not abandon():
                self.cancel()
                finished.wait()  # the wait ends within the library's cancel poll
                if outcome[0] is None:
                    try:
                        self.release()  # admitted just before the cancel came
                    except Error:
                        pass
            raise
        if outcome[0] is not None:
            raise outcome[0]
        return self

    async def admit_async(self, timeout=None):
        """admit() in a thread of its own (not the loop's executor: waiting admissions would fill
        it, and the settles that make room would queue behind them); cancelling the awaiting task
        cancels the wait."""
        import asyncio
        ms = _timeout_ms(self.timeout if timeout is None else timeout)
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        finished = threading.Event()

        def deliver(error):
            if not fut.done():
                if error is None:
                    fut.set_result(None)
                else:
                    fut.set_exception(error)

        def then(error):
            finished.set()
            try:
                loop.call_soon_threadsafe(deliver, error)
            except RuntimeError:
                pass  # the loop is closed: nobody awaits it any more

        self._take("admit")
        thread, abandon = self._wait_in_thread(ms, then)
        try:
            thread.start()
        except BaseException:
            if not abandon():
                self.cancel()  # nobody will await it
            raise
        try:
            await fut
        except asyncio.CancelledError:
            self.cancel()
            while not finished.is_set():  # the wait ends within the library's cancel poll
                await asyncio.sleep(0.005)
            if self.fence:
                try:
                    self.release()  # admitted just before the cancel came
                except Error:
                    pass
            raise
        return self

    def cancel(self):
        """Ends a wait in admit() (any thread)."""
        if self._handle is not None:
            _lib.lib.tollgate_call_cancel(self._handle)

    def settle(self, usage=None, *, input_tokens=None, output_tokens=None):
        """The call succeeded: its real usage (see _usage_counts; None: the estimate stands)."""
        if input_tokens is not None or output_tokens is not None:
            i = _count("input_tokens", -1 if input_tokens is None else input_tokens, allow_unknown=True)
            o = _count("output_tokens", -1 if output_tokens is None else output_tokens, allow_unknown=True)
        else:
            i, o = _usage_counts(usage)
        self._run(_lib.lib.tollgate_call_settle, i, o)

    def report_429(self, retry_after=None):
        """The provider answered 429: every caller backs off (`retry_after`: seconds, or None)."""
        if retry_after is None:
            ms = -1
        elif isinstance(retry_after, bool) or not isinstance(retry_after, (int, float)):
            raise TypeError(f"tollgate: retry_after must be seconds, not {type(retry_after).__name__}")
        elif math.isnan(retry_after) or retry_after < 0:
            raise UsageError(f"tollgate: retry_after must be 0 or more seconds ({retry_after})",
                             code=_lib.E_USAGE, kind="usage")
        else:
            ms = int(min(retry_after * 1000.0, _lib.INT64_MAX / 2))
        self._run(_lib.lib.tollgate_call_report_429, ms)

    def release(self):
        """Given up before an answer: the slot back, the estimate stands."""
        self._run(_lib.lib.tollgate_call_release)

    # The HTTP answer, as the proxy reads it (tollgate.httpx uses these).
    def answer_headers(self, status, headers):
        if isinstance(status, bool) or not isinstance(status, int):
            raise TypeError("tollgate: status must be an int")
        pairs = [(k if isinstance(k, bytes) else str(k).encode("latin-1", "replace"),
                  v if isinstance(v, bytes) else str(v).encode("latin-1", "replace")) for k, v in headers]
        pairs = [(k, v) for k, v in pairs if b"\0" not in k and b"\0" not in v]
        names = (ctypes.c_char_p * max(1, len(pairs)))(*[k for k, _ in pairs])
        values = (ctypes.c_char_p * max(1, len(pairs)))(*[v for _, v in pairs])
        self._run(_lib.lib.tollgate_call_headers, status, names, values, len(pairs))

    def answer_body(self, chunk):
        data = bytes(chunk)
        self._run(_lib.lib.tollgate_call_body, data, len(data))

    def answer_finish(self, broken_off=False):
        self._run(_lib.lib.tollgate_call_finish, 1 if broken_off else 0)

    def _end_after(self, exc):
        """What a `with` block's end means for an admitted call still running."""
        if not self.holds_slot and not self.fence:
            return
        try:
            if exc is None:
                self.settle(None)
                return
            status = getattr(exc, "status_code", None)
            if status == 429:
                response = getattr(exc, "response", None)
                headers = getattr(response, "headers", None) if response is not None else None
                try:
                    value = headers.get("retry-after") if headers is not None else None
                except Exception:  # a headers object of its own kind: the time is not told
                    value = None
                self.report_429(_retry_after_seconds(value))
            else:
                self.release()
        except StateError:
            pass  # ended inside the block (settled, reported or released)
        except Error:
            # The block's own exception is what the caller gets: ending the call must not
            # replace it. The slot goes back if it can (else with the call's end, or the
            # process's, as for any call not ended).
            if exc is None:
                raise
            with contextlib.suppress(Error):
                self.release()

    def __enter__(self):
        return self.admit()

    def __exit__(self, exc_type, exc, tb):
        self._end_after(exc)
        return False

    async def __aenter__(self):
        return await self.admit_async()

    async def __aexit__(self, exc_type, exc, tb):
        import asyncio
        await asyncio.get_running_loop().run_in_executor(None, self._end_after, exc)
        return False
