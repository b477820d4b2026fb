"""tollgate.call, async with, @limited, errors, status: the Python API over a directory home."""

import asyncio
import threading

import pytest

import tollgate


def test_with_call_settles_the_real_usage(cli, provider_status):
    cli("limits", "set", "anthropic", "--requests", "10", "--tokens", "100000", "--window", "60",
        "--parallel", "2")
    with tollgate.call("anthropic", caller="nightly", model="claude-x", input_tokens=1200, max_tokens=800,
                       timeout=30) as call:
        assert call.fence > 0 and call.holds_slot
        assert provider_status("anthropic")["used_tokens"] == 2000  # the estimate, until settled
        call.settle({"input_tokens": 1100, "output_tokens": 90})
    p = provider_status("anthropic")
    assert p["used_requests"] == 1 and p["used_tokens"] == 1190 and p["slots"] == []


def test_usage_objects_of_either_sdk(cli, provider_status):
    cli("limits", "set", "p", "--requests", "10", "--window", "60")

    class AnthropicUsage:
        input_tokens, output_tokens, cache_creation_input_tokens = 10, 5, 3

    class OpenAIUsage:
        prompt_tokens, completion_tokens = 7, 2

    class Response:
        usage = OpenAIUsage()

    for usage in (AnthropicUsage(), Response()):
        with tollgate.call("p", input_tokens=100, max_tokens=100) as call:
            call.settle(usage)
    assert provider_status("p")["used_tokens"] == 18 + 9


def test_a_block_that_raises_releases_and_a_429_backs_off(cli, provider_status):
    cli("limits", "set", "p", "--requests", "10", "--window", "60", "--parallel", "1")
    with pytest.raises(RuntimeError):
        with tollgate.call("p", input_tokens=1, max_tokens=1):
            raise RuntimeError("the SDK failed")
    assert provider_status("p")["slots"] == []

    class RateLimitError(Exception):
        status_code = 429

        class response:
            headers = {"retry-after": "3"}

    with pytest.raises(RateLimitError):
        with tollgate.call("p", input_tokens=1, max_tokens=1):
            raise RateLimitError()
    p = provider_status("p")
    assert p["slots"] == [] and p["consecutive_429s"] == 1 and p["backoff_remaining_ms"] > 0


def test_report_429_with_retry_after(cli, provider_status):
    cli("limits", "set", "p", "--requests", "10", "--window", "60")
    call = tollgate.call("p", input_tokens=1, max_tokens=1).admit()
    call.report_429(retry_after=2.5)
    p = provider_status("p")
    assert p["consecutive_429s"] == 1 and p["backoff_remaining_ms"] > 1000
    with pytest.raises(tollgate.Refused) as e:  # the backoff lies beyond a 0.1 s timeout
        tollgate.call("p", input_tokens=1, max_tokens=1, timeout=0.1).admit()
    assert e.value.retry_after is not None and e.value.retry_after > 1


def test_timeout_is_a_timeouterror(cli):
    cli("limits", "set", "p", "--requests", "10", "--window", "60", "--parallel", "1")
    with tollgate.call("p", input_tokens=1, max_tokens=1):
        with pytest.raises(TimeoutError) as e:
            with tollgate.call("p", input_tokens=1, max_tokens=1, timeout=0.2):
                pass
        assert isinstance(e.value, tollgate.Timeout) and e.value.kind == "timeout"


def test_paused_is_refused(cli):
    cli("limits", "set", "p", "--requests", "10", "--window", "60")
    cli("pause", "p", "--reason", "maintenance")
    with pytest.raises(tollgate.Refused) as e:
        with tollgate.call("p", timeout=10):
            pass
    assert "maintenance" in str(e.value)


def test_limited_decorator_sync_and_async(cli, provider_status):
    cli("limits", "set", "p", "--requests", "10", "--window", "60")

    @tollgate.limited("p", caller="deco", input_tokens=50, max_tokens=50)
    def ask(x):
        return {"input_tokens": 3, "output_tokens": x}

    @tollgate.limited("p", caller="deco", input_tokens=50, max_tokens=50)
    async def ask_async(x):
        return {"input_tokens": 4, "output_tokens": x}

    assert ask(1) == {"input_tokens": 3, "output_tokens": 1}
    assert asyncio.run(ask_async(2))["output_tokens"] == 2
    assert provider_status("p")["used_tokens"] == 4 + 6


def test_async_with_and_cancellation(cli, provider_status):
    cli("limits", "set", "p", "--requests", "10", "--window", "60", "--parallel", "1")

    async def main():
        async with tollgate.call("p", input_tokens=1, max_tokens=1) as held:
            assert held.holds_slot
            waiter = asyncio.create_task(tollgate.call("p", input_tokens=1, max_tokens=1, timeout=60).__aenter__())
            await asyncio.sleep(0.3)  # not needed for correctness: a cancel before the wait ends it too
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
        async with tollgate.call("p", input_tokens=1, max_tokens=1, timeout=10) as again:
            again.settle(None)

    asyncio.run(main())
    p = provider_status("p")
    assert p["slots"] == [] and p["queue"] == [] and p["used_requests"] == 2


def test_cancel_from_another_thread(cli):
    cli("limits", "set", "p", "--requests", "10", "--window", "60", "--parallel", "1")
    with tollgate.call("p", input_tokens=1, max_tokens=1):
        waiter = tollgate.call("p", input_tokens=1, max_tokens=1, timeout=60)
        threading.Timer(0.2, waiter.cancel).start()
        with pytest.raises(tollgate.Cancelled):
            waiter.admit()


def test_status(cli):
    cli("limits", "set", "p", "--requests", "3", "--window", "60")
    doc = tollgate.status()
    assert doc["home_exists"] and [p["provider"] for p in doc["providers"]] == ["p"]
    assert doc["providers"][0]["requests"] == 3


def test_many_async_waiters_do_not_starve_the_settles(cli, provider_status):
    # More waiters than the loop's default executor has threads: each waits in a thread of its
    # own, so the settles that make room are never queued behind them.
    cli("limits", "set", "p", "--requests", "1000", "--window", "60", "--parallel", "1")

    async def one(i):
        async with tollgate.call("p", caller=f"a{i}", input_tokens=1, max_tokens=1, timeout=60) as c:
            await asyncio.sleep(0.005)
            c.settle(input_tokens=1, output_tokens=1)

    async def main():
        await asyncio.wait_for(asyncio.gather(*[one(i) for i in range(24)]), timeout=120)

    asyncio.run(main())
    p = provider_status("p")
    assert p["used_requests"] == 24 and p["slots"] == [] and p["queue"] == []


def test_a_redis_home(cli, provider_status):
    """The same calls on a Redis home (the server scripts/test.sh shares: TOLLGATE_TEST_REDIS_URL)."""
    import os
    import uuid
    url = os.environ.get("TOLLGATE_TEST_REDIS_URL")
    if not url:
        pytest.skip("TOLLGATE_TEST_REDIS_URL names no redis-server")
    home = f"{url}?prefix=py{uuid.uuid4().hex[:12]}"
    cli("limits", "set", "p", "--requests", "10", "--tokens", "10000", "--window", "60", "--parallel", "1",
        "--home", home)
    with tollgate.call("p", input_tokens=100, max_tokens=100, home=home) as call:
        with pytest.raises(tollgate.Timeout):
            tollgate.call("p", input_tokens=1, max_tokens=1, timeout=0.2, home=home).admit()
        call.settle(input_tokens=30, output_tokens=12)
    p = next(p for p in tollgate.status(home)["providers"] if p["provider"] == "p")
    assert p["used_tokens"] == 42 and p["slots"] == [] and p["queue"] == []


def test_a_hostile_retry_after_neither_hides_the_sdk_error_nor_keeps_the_slot(cli, provider_status):
    # Told, not trusted: an absurd Retry-After is capped at a day, one that is no time is left
    # out; the SDK's error reaches the caller, the 429 backs everyone off, the slot comes back.
    cli("limits", "set", "p", "--requests", "100", "--window", "60", "--parallel", "1")
    day_ms = 24 * 3600 * 1000
    for value, capped in (("99999999999999999999", True), ("1e300", True), ("inf", True),
                          ("Fri, 31 Dec 9999 23:59:59 GMT", True), ("nan", False), ("-1", False),
                          ("soon", False), ("", False)):
        cli("reset-backoff", "p")

        class RateLimitError(Exception):
            status_code = 429

            class response:
                headers = {"retry-after": value}

        with pytest.raises(RateLimitError):
            with tollgate.call("p", input_tokens=1, max_tokens=1):
                raise RateLimitError()
        p = provider_status("p")
        assert p["slots"] == [], value
        assert p["consecutive_429s"] >= 1 and p["backoff_remaining_ms"] > 0, value
        if capped:
            assert day_ms / 2 < p["backoff_remaining_ms"] <= day_ms + 10000, (value, p["backoff_remaining_ms"])
