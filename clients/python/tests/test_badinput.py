"""Bad input from Python is a typed error, never a crash; calls out of turn; closed homes; fork()."""

import os

import pytest

import tollgate


@pytest.fixture(autouse=True)
def limits(cli):
    cli("limits", "set", "p", "--requests", "100", "--window", "60", "--parallel", "2")


@pytest.mark.parametrize("kwargs, error", [
    (dict(provider=123), TypeError),
    (dict(provider=""), ValueError),
    (dict(provider="p", input_tokens="5"), TypeError),
    (dict(provider="p", input_tokens=1.5), TypeError),
    (dict(provider="p", input_tokens=True), TypeError),
    (dict(provider="p", input_tokens=-1), ValueError),
    (dict(provider="p", max_tokens=2**70), ValueError),
    (dict(provider="p", caller=b"x"), TypeError),
    (dict(provider="p", model="a\0b"), ValueError),
    (dict(provider="p", timeout=-1), ValueError),
    (dict(provider="p", timeout=float("nan")), ValueError),
    (dict(provider="p", timeout="30"), TypeError),
])
def test_wrong_types_and_negative_numbers(kwargs, error):
    provider = kwargs.pop("provider")
    with pytest.raises(error):
        tollgate.call(provider, **kwargs)


@pytest.mark.parametrize("model", ["m" * (4 << 20), "m\n\x7f", "a b", "m" * 65],
                         ids=["4 MB", "control bytes", "a space", "65 characters"])
def test_a_model_name_the_cli_refuses_is_refused(provider_status, model):
    # Each went into the state and the history whole (a 4 MB line that no reader takes).
    with pytest.raises(tollgate.UsageError) as e:
        tollgate.call("p", model=model, input_tokens=1, max_tokens=1).admit()
    assert "model name" in str(e.value) and len(str(e.value)) < 1000
    assert provider_status("p")["used_requests"] == 0


def test_negative_numbers_are_usage_errors():
    with pytest.raises(tollgate.UsageError) as e:
        tollgate.call("p", input_tokens=-5)
    assert e.value.kind == "usage" and isinstance(e.value, ValueError)


def test_an_unknown_provider_is_a_typed_error():
    with pytest.raises(tollgate.Error) as e:
        with tollgate.call("nobody-set-this", timeout=1):
            pass
    assert e.value.kind in ("usage", "not_found")


def test_settle_and_report_values():
    call = tollgate.call("p").admit()
    with pytest.raises(TypeError):
        call.settle("lots")
    with pytest.raises(TypeError):
        call.settle({"input_tokens": "1", "output_tokens": 1})
    with pytest.raises(ValueError):
        call.settle(input_tokens=-3, output_tokens=1)
    with pytest.raises(TypeError):
        call.report_429(retry_after="soon")
    with pytest.raises(ValueError):
        call.report_429(retry_after=-1)
    call.settle(input_tokens=1, output_tokens=1)


def test_a_call_used_after_it_ended():
    call = tollgate.call("p").admit()
    call.settle(None)
    with pytest.raises(tollgate.StateError) as e:
        call.settle(None)
    assert "already ended" in str(e.value)
    with pytest.raises(tollgate.StateError):
        call.release()
    with pytest.raises(tollgate.StateError):
        call.report_429()
    with pytest.raises(tollgate.StateError):
        call.admit()


def test_a_handle_used_after_its_home_was_closed(provider_status, home):
    h = tollgate.Home(home)
    call = h.call("p").admit()
    h.close()
    with pytest.raises(tollgate.ClosedError):
        call.settle(None)
    with pytest.raises(tollgate.ClosedError):
        h.call("p")
    with pytest.raises(tollgate.ClosedError):
        h.status()
    h.close()  # twice: nothing
    assert len(provider_status("p")["slots"]) == 1
    del call  # freeing the call gives its slot back
    import gc
    gc.collect()
    assert provider_status("p")["slots"] == []


def test_fork_after_open(provider_status, home):
    """A Home opened before fork() answers ForkedError in the child; the default home is opened
    again there; the parent's call stays the parent's."""
    h = tollgate.Home(home)
    held = h.call("p").admit()
    tollgate.status()  # the default home, opened in the parent
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            try:
                h.call("p")
                code = 1
            except tollgate.ForkedError as e:
                code = 0 if "fork" in str(e) else 2
            try:
                held.settle(None)
                code = 3
            except tollgate.ForkedError:
                pass
            with tollgate.call("p", caller="child", timeout=10) as c:  # the default home, reopened
                c.settle(None)
        except BaseException:
            code = 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    p = provider_status("p")
    assert len(p["slots"]) == 1  # the parent's, not given back by the child
    held.settle(None)
    assert provider_status("p")["slots"] == []
    h.close()
