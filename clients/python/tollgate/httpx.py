"""A transport for httpx — the HTTP client of the official Anthropic and OpenAI Python SDKs —
that puts every request through the shared quota, as `tollgate proxy` does:

    client = anthropic.Anthropic(http_client=httpx.Client(transport=tollgate.httpx.Transport("anthropic")))
    client = anthropic.AsyncAnthropic(
        http_client=httpx.AsyncClient(transport=tollgate.httpx.AsyncTransport("anthropic")))

Each request is estimated from its JSON body (model, prompt size, max_tokens) and admitted
before it is sent (holding a parallel slot until its answer has been read); the answer's
rate-limit headers are acted on as they arrive (a budget spent holds every caller until its
reset), its real usage (JSON or server-sent events) replaces the estimate, and a 429 backs every
caller off by its Retry-After. While there is no room the transport answers 429 itself with a
Retry-After, as the proxy does, so the SDK's own retry logic waits. The answer's body is asked
for uncompressed (Accept-Encoding: identity) so that its usage can be read.
A failure of the metering while the body is read (the home closed meanwhile) never reaches the
application: its bytes arrive regardless, and the call ends as broken off.
"""

import asyncio
import json

import httpx

from ._core import _timeout_ms
from ._errors import Cancelled, Error, Refused, Timeout
from . import open_home

__all__ = ["Transport", "AsyncTransport"]


def _refusal(request, error):
    headers = {"content-type": "application/json"}
    if error.retry_after is not None:
        headers["retry-after"] = str(max(1, int(-(-error.retry_after // 1))))
    body = {"type": "error", "error": {"type": "rate_limit_error",
                                        "message": "no room in the shared quota: " + error.message}}
    return httpx.Response(429, headers=headers, content=json.dumps(body).encode(), request=request)


def _prepare(request):
    request.headers["accept-encoding"] = "identity"
    return request.read()


class _Meter:
    """The metering of one answer: a failure of it (the home closed mid-answer, ...) never
    reaches the application, which reads its bytes regardless; it ends the metering (the call
    broken off) and is kept in `error`. The call is dropped at the end: freeing it gives back a
    slot that no end could."""

    def __init__(self, call):
        self.call = call
        self.error = None

    def body(self, chunk):
        if self.call is None:
            return
        try:
            self.call.answer_body(chunk)
        except Error as e:
            self.error = e
            self.finish(broken_off=True)

    def finish(self, broken_off):
        call, self.call = self.call, None
        if call is None:
            return
        try:
            call.answer_finish(broken_off=broken_off)
        except Error as e:
            if self.error is None:
                self.error = e
            try:
                call.release()  # the answer was not metered: the estimate stands
            except Error:
                pass  # already ended, or its home closed: freeing it gives the slot back


class _MeteredStream(httpx.SyncByteStream):
    """The answer's body as it is read: each chunk to the meter; at the end, the call settled."""

    def __init__(self, inner, call):
        self._inner = inner
        self._meter = _Meter(call)
        self._done = False

    @property
    def metering_error(self):
        return self._meter.error

    def __iter__(self):
        for chunk in self._inner:
            self._meter.body(chunk)
            yield chunk
        self._done = True

    def close(self):
        try:
            self._inner.close()
        finally:
            self._meter.finish(broken_off=not self._done)


class _AsyncMeteredStream(httpx.AsyncByteStream):
    def __init__(self, inner, call):
        self._inner = inner
        self._meter = _Meter(call)
        self._done = False

    @property
    def metering_error(self):
        return self._meter.error

    async def __aiter__(self):
        async for chunk in self._inner:
            self._meter.body(chunk)
            yield chunk
        self._done = True

    async def aclose(self):
        try:
            await self._inner.aclose()
        finally:
            if self._meter.call is not None:
                await asyncio.get_running_loop().run_in_executor(None, self._meter.finish, not self._done)


class Transport(httpx.BaseTransport):
    """`provider`: the quota's provider name; `caller`: who, in status and history; `timeout`:
    how long a request waits for room (seconds); `transport`: the one that sends (default
    httpx.HTTPTransport()); `home`: a home string or tollgate.Home (None: TOLLGATE_HOME)."""

    def __init__(self, provider, *, caller=None, timeout=30.0, home=None, transport=None):
        _timeout_ms(timeout)
        self._provider = provider
        self._caller = caller
        self._timeout = timeout
        self._home = home
        self._inner = transport if transport is not None else httpx.HTTPTransport()

    def handle_request(self, request):
        body = _prepare(request)
        call = open_home(self._home).http_call(self._provider, body, caller=self._caller)
        try:
            call.admit(self._timeout)
        except (Timeout, Refused, Cancelled) as e:
            return _refusal(request, e)
        try:
            response = self._inner.handle_request(request)
            call.answer_headers(response.status_code, response.headers.raw)
        except BaseException:
            call.release()
            raise
        return httpx.Response(response.status_code, headers=response.headers,
                              stream=_MeteredStream(response.stream, call), extensions=response.extensions,
                              request=request)

    def close(self):
        self._inner.close()


class AsyncTransport(httpx.AsyncBaseTransport):
    """The same for httpx.AsyncClient; the wait for room runs in a worker thread, and cancelling
    the request's task cancels it."""

    def __init__(self, provider, *, caller=None, timeout=30.0, home=None, transport=None):
        _timeout_ms(timeout)
        self._provider = provider
        self._caller = caller
        self._timeout = timeout
        self._home = home
        self._inner = transport if transport is not None else httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request):
        request.headers["accept-encoding"] = "identity"
        body = await request.aread()
        call = open_home(self._home).http_call(self._provider, body, caller=self._caller)
        try:
            await call.admit_async(self._timeout)
        except (Timeout, Refused, Cancelled) as e:
            return _refusal(request, e)
        loop = asyncio.get_running_loop()
        try:
            response = await self._inner.handle_async_request(request)
            await loop.run_in_executor(None, call.answer_headers, response.status_code, response.headers.raw)
        except BaseException:
            await loop.run_in_executor(None, call.release)
            raise
        return httpx.Response(response.status_code, headers=response.headers,
                              stream=_AsyncMeteredStream(response.stream, call), extensions=response.extensions,
                              request=request)

    async def aclose(self):
        await self._inner.aclose()
