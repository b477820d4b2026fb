"""Misuse from threads and signals is an error, never a crash: a call used by two threads, a home
closed while other threads use it, Ctrl-C during a wait; and the limits of what a usage and a
metering failure may do. The library's functions are wrapped (monkeypatch) where a test must
know that a thread is inside one; events order the threads, deadlines are only safety limits."""

import gc
import os
import subprocess
import sys
import textwrap
import threading

import httpx
import pytest

import tollgate
import tollgate.httpx
from tollgate import _lib

SAFETY = 60  # seconds: a limit for a hang, never the subject of an assertion


def _run_script(home, source):
    """`source` in a fresh interpreter on `home` (a crash there is a failed test, not a dead pytest)."""
    env = dict(os.environ, TOLLGATE_HOME=home,
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                           os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(source)], capture_output=True, text=True,
                          timeout=SAFETY, env=env)


class _Overlaps:
    """Wraps a library function of a handle: counts the threads inside it per handle; a second
    one is recorded and answered E_STATE without entering the library (so that the test of a
    missing guard fails instead of crashing)."""

    def __init__(self, monkeypatch, name):
        self.real = getattr(_lib.lib, name)
        self.inside = {}
        self.overlaps = []
        self.entered = threading.Event()
        self.proceed = None  # an Event the first entry waits for, if set
        self.lock = threading.Lock()

        def wrapper(handle, *args):
            key = handle.value if hasattr(handle, "value") else handle
            with self.lock:
                if self.inside.get(key, 0):
                    self.overlaps.append(key)
                    return _lib.E_STATE
                self.inside[key] = 1
            self.entered.set()
            try:
                if self.proceed is not None:
                    assert self.proceed.wait(SAFETY)
                return self.real(handle, *args)
            finally:
                with self.lock:
                    self.inside[key] = 0

        wrapper.__name__ = name
        monkeypatch.setattr(_lib.lib, name, wrapper)


def test_one_call_used_by_two_threads_is_a_state_error(cli, monkeypatch):
    cli("limits", "set", "p", "--requests", "10", "--window", "60", "--parallel", "1")
    held = tollgate.call("p", input_tokens=1, max_tokens=1).admit()
    waiter = tollgate.call("p", input_tokens=1, max_tokens=1, timeout=SAFETY)
    admits = _Overlaps(monkeypatch, "tollgate_call_admit")
    outcome = []

    def wait():
        try:
            waiter.admit()
            outcome.append(None)
        except tollgate.Error as e:
            outcome.append(e)

    t = threading.Thread(target=wait)
    t.start()
    assert admits.entered.wait(SAFETY)  # the waiter is in the library, waiting for the slot
    for use in (lambda: waiter.admit(1), lambda: waiter.settle(None), waiter.release,
                lambda: waiter.report_429(1), lambda: waiter.fence, lambda: waiter.waited):
        with pytest.raises(tollgate.StateError, match="another thread"):
            use()
    waiter.cancel()  # any thread may
    t.join(SAFETY)
    assert not t.is_alive() and isinstance(outcome[0], tollgate.Cancelled)
    assert admits.overlaps == []
    held.release()
    assert waiter.fence == 0  # the guard is free again once the wait ended


def test_two_threads_hammering_one_call_do_not_crash(home, cli):
    cli("limits", "set", "p", "--requests", "100000", "--window", "60", "--parallel", "1")
    r = _run_script(home, """
        import threading, tollgate
        h = tollgate.open_home()
        kinds = set()
        for i in range(300):
            c = h.call("p", input_tokens=1, max_tokens=1)
            for use in (lambda: c.admit(1), lambda: c.settle(None)):
                bar = threading.Barrier(2)
                def go():
                    bar.wait()
                    try:
                        use()
                    except tollgate.StateError as e:
                        kinds.add("state")
                ts = [threading.Thread(target=go) for _ in range(2)]
                [t.start() for t in ts]
                [t.join() for t in ts]
            del c
        s = h.status()["providers"][0]
        print("ok", s["slots"], s["used_requests"])
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == "ok" and "[]" in r.stdout


def test_close_while_another_thread_uses_the_home(cli, monkeypatch):
    cli("limits", "set", "p", "--requests", "10", "--window", "60")
    h = tollgate.Home()
    freed = []
    real_close = _lib.lib.tollgate_home_close
    statuses = _Overlaps(monkeypatch, "tollgate_status_json")
    statuses.proceed = threading.Event()

    def close(handle):
        freed.append(dict(statuses.inside))  # who was inside when the handle was freed
        real_close(handle)

    monkeypatch.setattr(_lib.lib, "tollgate_home_close", close)
    result = []
    t = threading.Thread(target=lambda: result.append(h.status()))
    t.start()
    assert statuses.entered.wait(SAFETY)  # the thread is inside tollgate_status_json
    h.close()
    assert freed == []  # not freed under the thread
    with pytest.raises(tollgate.ClosedError):
        h.status()
    with pytest.raises(tollgate.ClosedError):
        h.call("p")
    statuses.proceed.set()
    t.join(SAFETY)
    assert not t.is_alive() and result[0]["providers"][0]["provider"] == "p"
    assert len(freed) == 1 and not any(freed[0].values())  # freed once, by the last use
    h.close()  # again: nothing
    assert len(freed) == 1


def test_closing_a_home_used_by_threads_does_not_crash(home, cli):
    cli("limits", "set", "p", "--requests", "1000000", "--window", "60")
    r = _run_script(home, """
        import threading, tollgate
        for i in range(200):
            h = tollgate.Home()
            running = [threading.Event(), threading.Event()]
            def user(running):
                while True:
                    try:
                        h.status()
                        h.call("p")
                    except tollgate.ClosedError:
                        return
                    running.set()  # closed from now on while it is in the library, most likely
            ts = [threading.Thread(target=user, args=(e,)) for e in running]
            [t.start() for t in ts]
            [e.wait() for e in running]
            h.close()
            [t.join() for t in ts]
        print("ok")
    """)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_ctrl_c_ends_a_wait_in_admit(home, cli):
    cli("limits", "set", "p", "--requests", "10", "--window", "60", "--parallel", "1")
    r = _run_script(home, """
        import os, signal, threading, tollgate
        from tollgate import _lib
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job inherits SIG_IGN
        held = tollgate.call("p", input_tokens=1, max_tokens=1).admit()
        waiter = tollgate.call("p", input_tokens=1, max_tokens=1, timeout=3600)
        real = _lib.lib.tollgate_call_admit
        entered = threading.Event()
        def admit(handle, ms, err):
            entered.set()
            return real(handle, ms, err)
        admit.__name__ = "tollgate_call_admit"
        _lib.lib.tollgate_call_admit = admit
        def interrupt():
            entered.wait()
            os.kill(os.getpid(), signal.SIGINT)
        threading.Thread(target=interrupt, daemon=True).start()
        try:
            waiter.admit()
            print("admitted")
        except KeyboardInterrupt:
            print("interrupted")
        # The wait was ended (cancelled), not left running: the call is free, not admitted, and
        # the slot given back is nobody's.
        assert waiter.fence == 0
        held.release()
        p = tollgate.status()["providers"][0]
        print(p["slots"], p["queue"])
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["interrupted", "[] []"]


def test_a_usage_beyond_int64_is_a_usage_error(cli, provider_status):
    cli("limits", "set", "p", "--requests", "10", "--window", "60")
    call = tollgate.call("p", input_tokens=1, max_tokens=1).admit()
    huge = {"input_tokens": 2**62, "cache_creation_input_tokens": 2**62, "output_tokens": 1}
    with pytest.raises(tollgate.UsageError, match="cache_creation_input_tokens"):
        call.settle(huge)
    call.settle({"input_tokens": 5, "output_tokens": 1})  # still admitted: nothing was settled
    assert provider_status("p")["used_tokens"] == 6


def test_the_home_closed_mid_answer_leaves_the_answer_readable(cli, provider_status):
    cli("limits", "set", "anthropic", "--requests", "10", "--window", "60", "--parallel", "1")
    chunks = [b"data: %d\n\n" % i for i in range(50)]

    def handler(request):
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=iter(chunks))

    h = tollgate.Home()
    transport = tollgate.httpx.Transport("anthropic", home=h, transport=httpx.MockTransport(handler))
    read = []
    with httpx.Client(transport=transport) as client:
        body = b'{"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}'
        with client.stream("POST", "http://provider.invalid/v1/messages", content=body) as r:
            for chunk in r.iter_raw():
                read.append(chunk)
                if len(read) == 10:
                    h.close()
    assert b"".join(read) == b"".join(chunks)
    del r
    gc.collect()
    assert provider_status("anthropic")["slots"] == []  # the call ended: its slot is back


def test_the_home_closed_mid_answer_async(cli, provider_status):
    import asyncio
    cli("limits", "set", "anthropic", "--requests", "10", "--window", "60", "--parallel", "1")
    chunks = [b"data: %d\n\n" % i for i in range(50)]

    async def body():
        for c in chunks:
            yield c

    def handler(request):
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    h = tollgate.Home()
    read = []

    async def main():
        transport = tollgate.httpx.AsyncTransport("anthropic", home=h, transport=httpx.MockTransport(handler))
        async with httpx.AsyncClient(transport=transport) as client:
            request = b'{"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}'
            async with client.stream("POST", "http://provider.invalid/v1/messages", content=request) as r:
                async for chunk in r.aiter_raw():
                    read.append(chunk)
                    if len(read) == 10:
                        h.close()

    asyncio.run(main())
    assert b"".join(read) == b"".join(chunks)
    gc.collect()
    assert provider_status("anthropic")["slots"] == []
