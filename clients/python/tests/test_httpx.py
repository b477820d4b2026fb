"""tollgate.httpx.Transport against the test mock provider (tests/helpers/mockprovider.js)."""

import asyncio
import json
import threading

import httpx
import pytest

import tollgate
import tollgate.httpx

BODY = {"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}


def test_no_request_reaches_the_mock_while_it_has_no_room(cli, mock, provider_status):
    # The mock allows 3 requests per 1.5 s; Tollgate is set to 3 per 2 s (the margin covers the
    # time between an admission and the request's arrival there).
    url = mock.start("--limit", "3", "--window-ms", "1500")
    cli("limits", "set", "anthropic", "--requests", "3", "--window", "2", "--parallel", "2")
    transport = tollgate.httpx.Transport("anthropic", caller="py-httpx", timeout=30)
    statuses = []
    with httpx.Client(transport=transport, base_url=url, timeout=30) as client:
        def one():
            r = client.post("/v1/messages", json=BODY, headers=HEADERS)
            statuses.append((r.status_code, r.json()["usage"]))
        threads = [threading.Thread(target=one) for _ in range(7)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    stats = mock.stats()
    assert [s for s, _ in statuses] == [200] * 7
    assert stats["refused"] == 0 and stats["violations"] == 0 and stats["requests"] >= 7
    assert stats["maxConcurrent"] <= 2


def test_tokens_settle_to_the_reported_usage(cli, mock, provider_status):
    url = mock.start()
    cli("limits", "set", "anthropic", "--requests", "100", "--tokens", "1000000", "--window", "60")
    with httpx.Client(transport=tollgate.httpx.Transport("anthropic"), base_url=url) as client:
        r = client.post("/v1/messages", json=BODY, headers=HEADERS)
        assert r.status_code == 200 and r.json()["usage"] == {"input_tokens": 11, "output_tokens": 5}
        with client.stream("POST", "/v1/messages", json=dict(BODY, stream=True), headers=HEADERS) as s:
            events = [line for line in s.iter_lines() if line.startswith("data:")]
        assert events
    # Both estimates (the prompt's bytes / 4 + max_tokens 64) were replaced by the usage the mock reported.
    assert provider_status("anthropic")["used_tokens"] == mock.stats()["usageTokens"] == 2 * 16


def test_the_async_transport_and_a_429(cli, mock, provider_status):
    url = mock.start()
    cli("limits", "set", "anthropic", "--requests", "100", "--tokens", "1000000", "--window", "60")

    async def main():
        transport = tollgate.httpx.AsyncTransport("anthropic", caller="py-async")
        async with httpx.AsyncClient(transport=transport, base_url=url) as client:
            rs = await asyncio.gather(*[client.post("/v1/messages", json=BODY, headers=HEADERS) for _ in range(3)])
            assert [r.status_code for r in rs] == [200, 200, 200]
            r = await client.post("/v1/messages", json=BODY, headers=dict(HEADERS, **{"x-mock": "429"}))
            assert r.status_code == 429

    asyncio.run(main())
    p = provider_status("anthropic")
    assert p["used_tokens"] > 3 * 16  # three settled to 16 each; the 429 keeps its estimate
    assert p["consecutive_429s"] == 1 and p["backoff_remaining_ms"] > 0 and p["slots"] == []


def test_no_room_is_answered_429_with_retry_after(cli, mock):
    url = mock.start()
    cli("limits", "set", "anthropic", "--requests", "1", "--window", "60")
    with httpx.Client(transport=tollgate.httpx.Transport("anthropic", timeout=1), base_url=url) as client:
        assert client.post("/v1/messages", json=BODY, headers=HEADERS).status_code == 200
        r = client.post("/v1/messages", json=BODY, headers=HEADERS)
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    assert r.json()["error"]["type"] == "rate_limit_error"
    assert mock.stats()["requests"] == 1
