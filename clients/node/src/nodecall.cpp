#include "nodecall.h"

#include "napiutil.h"
#include "nodehome.h"

#include <cstdio>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace tollgate::node {

namespace {

constexpr napi_type_tag CALL_TAG = { 0x746f6c6c67617465ULL, 0x43616c6c00000001ULL };

napi_value methodResult(napi_env env, int rc, const tollgate_error& err)
{
    if (rc != TOLLGATE_OK) {
        throwStatus(env, rc, err);
        return nullptr;
    }
    return undefinedValue(env);
}

} // namespace

struct NodeCall::Admission
{
    NodeCall* call = nullptr;
    napi_ref self = nullptr; // keeps the JS object (and so the call) alive while it waits
    napi_deferred deferred = nullptr;
    napi_threadsafe_function done = nullptr; // back to the JS thread (keeps the event loop alive)
    std::int64_t timeoutMs = 0;
    int rc = TOLLGATE_OK;
    tollgate_error err {};
};

napi_value NodeCall::defineClass(napi_env env)
{
    const napi_property_descriptor methods[] = {
        { "admit", nullptr, admit, nullptr, nullptr, nullptr, napi_default, nullptr },
        { "cancel", nullptr, cancel, nullptr, nullptr, nullptr, napi_default, nullptr },
        { "settle", nullptr, settle, nullptr, nullptr, nullptr, napi_default, nullptr },
        { "report429", nullptr, report429, nullptr, nullptr, nullptr, napi_default, nullptr },
        { "release", nullptr, release, nullptr, nullptr, nullptr, napi_default, nullptr },
        { "headers", nullptr, headers, nullptr, nullptr, nullptr, napi_default, nullptr },
        { "body", nullptr, body, nullptr, nullptr, nullptr, napi_default, nullptr },
        { "finish", nullptr, finish, nullptr, nullptr, nullptr, napi_default, nullptr },
        { "info", nullptr, info, nullptr, nullptr, nullptr, napi_default, nullptr },
        { "free", nullptr, free, nullptr, nullptr, nullptr, napi_default, nullptr },
    };
    napi_value cls = nullptr;
    napi_define_class(env, "NativeCall", NAPI_AUTO_LENGTH, construct, nullptr,
        sizeof methods / sizeof methods[0], methods, &cls);
    return cls;
}

// new NativeCall(home, provider, caller, model, inputTokens, outputTokens, slot)
// new NativeCall(home, provider, caller, body)   (estimated from an HTTP request's body)
napi_value NodeCall::construct(napi_env env, napi_callback_info cbinfo)
{
    Args a;
    if (!readArgs(env, cbinfo, a))
        return nullptr;
    tollgate_home* home = NodeHome::live(env, a.argv[0]);
    if (!home)
        return nullptr;
    std::optional<std::string> provider, caller, model;
    if (!readText(env, a.argv[1], "provider", false, provider)
        || !readText(env, a.argv[2], "caller", true, caller))
        return nullptr;
    tollgate_error err {};
    tollgate_call* call = nullptr;
    int rc = TOLLGATE_OK;
    if (a.argc <= 4) {
        const void* data = nullptr;
        size_t len = 0;
        if (!readBytes(env, a.argv[3], "body", data, len))
            return nullptr;
        rc = tollgate_call_new_http(
            home, provider->c_str(), caller ? caller->c_str() : nullptr, data, len, &call, &err);
    } else {
        std::int64_t input = 0, output = 0;
        bool slot = true;
        if (!readText(env, a.argv[3], "model", true, model)
            || !readCount(env, a.argv[4], "inputTokens", 0, input)
            || !readCount(env, a.argv[5], "maxTokens", 0, output) || !readBool(env, a.argv[6], "slot", slot))
            return nullptr;
        rc = tollgate_call_new(home, provider->c_str(), caller ? caller->c_str() : nullptr,
            model ? model->c_str() : nullptr, input, output, slot ? TOLLGATE_SLOT : 0, &call, &err);
    }
    if (rc != TOLLGATE_OK) {
        throwStatus(env, rc, err);
        return nullptr;
    }
    auto* self = new NodeCall;
    self->m_call = call;
    if (napi_wrap(env, a.self, self, finalize, nullptr, nullptr) != napi_ok) {
        tollgate_call_free(call);
        delete self;
        return nullptr;
    }
    napi_type_tag_object(env, a.self, &CALL_TAG);
    return a.self;
}

NodeCall* NodeCall::unwrapped(napi_env env, napi_value self)
{
    bool tagged = false;
    void* p = nullptr;
    if (napi_check_object_type_tag(env, self, &CALL_TAG, &tagged) != napi_ok || !tagged
        || napi_unwrap(env, self, &p) != napi_ok || !p) {
        bool pending = false;
        napi_is_exception_pending(env, &pending);
        if (pending) {
            napi_value ignored;
            napi_get_and_clear_last_exception(env, &ignored);
        }
        throwType(env, "tollgate: not a Call");
        return nullptr;
    }
    return static_cast<NodeCall*>(p);
}

NodeCall* NodeCall::usable(napi_env env, napi_value self)
{
    auto* c = unwrapped(env, self);
    if (!c)
        return nullptr;
    if (!c->m_call || c->m_freeWhenDone) {
        throwCode(env, TOLLGATE_E_STATE, "tollgate: the call was freed");
        return nullptr;
    }
    if (c->m_waiting) {
        throwCode(env, TOLLGATE_E_STATE, "tollgate: the call is waiting for admission");
        return nullptr;
    }
    return c;
}

NodeCall* NodeCall::unwrapped(napi_env env, napi_callback_info cbinfo, Args& a)
{
    return readArgs(env, cbinfo, a) ? unwrapped(env, a.self) : nullptr;
}

NodeCall* NodeCall::usable(napi_env env, napi_callback_info cbinfo, Args& a)
{
    return readArgs(env, cbinfo, a) ? usable(env, a.self) : nullptr;
}

napi_value NodeCall::admit(napi_env env, napi_callback_info cbinfo)
{
    Args a;
    NodeCall* c = usable(env, cbinfo, a);
    std::int64_t timeout = 0;
    if (!c || !readCount(env, a.argv[0], "timeoutMs", 0, timeout))
        return nullptr;
    napi_deferred deferred = nullptr;
    napi_value promise = nullptr;
    if (napi_create_promise(env, &deferred, &promise) != napi_ok)
        return nullptr;
    // A try first: with room (the common case) no thread is needed.
    tollgate_error err {};
    const int tried = tollgate_call_admit(c->m_call, 0, &err);
    if (tried == TOLLGATE_OK) {
        napi_resolve_deferred(env, deferred, undefinedValue(env));
        return promise;
    }
    if (timeout == 0 || (tried != TOLLGATE_E_TIMEOUT && tried != TOLLGATE_E_REFUSED)) {
        napi_reject_deferred(env, deferred, statusError(env, tried, err));
        return promise;
    }
    auto* w = new Admission;
    w->call = c;
    w->deferred = deferred;
    w->timeoutMs = timeout;
    if (napi_create_reference(env, a.self, 1, &w->self) != napi_ok
        || napi_create_threadsafe_function(env, nullptr, nullptr, makeText(env, "tollgate.admit"), 0, 1,
               nullptr, nullptr, w, admitComplete, &w->done)
            != napi_ok) {
        if (w->self)
            napi_delete_reference(env, w->self);
        delete w;
        tollgate_error failed {};
        failed.retry_after_ms = -1;
        snprintf(failed.message, sizeof failed.message, "tollgate: could not start the wait for admission");
        napi_reject_deferred(env, deferred, statusError(env, TOLLGATE_E_INTERNAL, failed));
        return promise;
    }
    c->m_waiting = true;
    try {
        std::thread(admitWait, w).detach();
    } catch (const std::system_error& e) {
        c->m_waiting = false;
        napi_release_threadsafe_function(w->done, napi_tsfn_abort);
        napi_delete_reference(env, w->self);
        tollgate_error failed {};
        failed.retry_after_ms = -1;
        snprintf(failed.message, sizeof failed.message, "tollgate: no thread for the wait (%s)", e.what());
        napi_reject_deferred(env, deferred, statusError(env, TOLLGATE_E_INTERNAL, failed));
        delete w;
    }
    return promise;
}

void NodeCall::admitWait(Admission* w)
{
    w->rc = tollgate_call_admit(w->call->m_call, w->timeoutMs, &w->err);
    // After the call below the JS thread may free `w` at any time: only the local is used.
    const napi_threadsafe_function done = w->done;
    napi_call_threadsafe_function(done, w, napi_tsfn_blocking);
    napi_release_threadsafe_function(done, napi_tsfn_release);
}

void NodeCall::admitComplete(napi_env env, napi_value, void*, void* data)
{
    if (!env)
        return; // the environment is going away: nothing to settle (the process is ending)
    auto* w = static_cast<Admission*>(data);
    NodeCall* c = w->call;
    c->m_waiting = false;
    if (c->m_freeWhenDone) {
        tollgate_call_free(c->m_call);
        c->m_call = nullptr;
    }
    if (w->rc == TOLLGATE_OK)
        napi_resolve_deferred(env, w->deferred, undefinedValue(env));
    else
        napi_reject_deferred(env, w->deferred, statusError(env, w->rc, w->err));
    napi_delete_reference(env, w->self);
    delete w;
}

napi_value NodeCall::cancel(napi_env env, napi_callback_info cbinfo)
{
    Args a;
    auto* c = unwrapped(env, cbinfo, a);
    if (!c)
        return nullptr;
    if (c->m_call)
        tollgate_call_cancel(c->m_call);
    return undefinedValue(env);
}

napi_value NodeCall::settle(napi_env env, napi_callback_info cbinfo)
{
    Args a;
    NodeCall* c = usable(env, cbinfo, a);
    std::int64_t input = -1, output = -1;
    if (!c || !readCount(env, a.argv[0], "inputTokens", -1, input)
        || !readCount(env, a.argv[1], "outputTokens", -1, output))
        return nullptr;
    tollgate_error err {};
    return methodResult(env, tollgate_call_settle(c->m_call, input, output, &err), err);
}

napi_value NodeCall::report429(napi_env env, napi_callback_info cbinfo)
{
    Args a;
    NodeCall* c = usable(env, cbinfo, a);
    std::int64_t retry = -1;
    if (!c || !readCount(env, a.argv[0], "retryAfterMs", -1, retry))
        return nullptr;
    tollgate_error err {};
    return methodResult(env, tollgate_call_report_429(c->m_call, retry, &err), err);
}

napi_value NodeCall::release(napi_env env, napi_callback_info cbinfo)
{
    Args a;
    NodeCall* c = usable(env, cbinfo, a);
    if (!c)
        return nullptr;
    tollgate_error err {};
    return methodResult(env, tollgate_call_release(c->m_call, &err), err);
}

// headers(status, [[name, value], ...])
napi_value NodeCall::headers(napi_env env, napi_callback_info cbinfo)
{
    Args a;
    NodeCall* c = usable(env, cbinfo, a);
    std::int64_t status = 0;
    if (!c || !readCount(env, a.argv[0], "status", 0, status))
        return nullptr;
    if (status > 999) {
        throwRange(env, "tollgate: status must be an HTTP status (0-999)");
        return nullptr;
    }
    bool isArray = false;
    napi_is_array(env, a.argv[1], &isArray);
    if (!isArray) {
        throwType(env, "tollgate: headers must be an array of [name, value] pairs");
        return nullptr;
    }
    std::uint32_t n = 0;
    napi_get_array_length(env, a.argv[1], &n);
    std::vector<std::string> names, values;
    for (std::uint32_t i = 0; i < n; ++i) {
        napi_value pair, name, value;
        bool pairIsArray = false;
        if (napi_get_element(env, a.argv[1], i, &pair) != napi_ok)
            return nullptr;
        napi_is_array(env, pair, &pairIsArray);
        if (!pairIsArray) {
            throwType(env, "tollgate: headers must be an array of [name, value] pairs");
            return nullptr;
        }
        std::optional<std::string> k, v;
        if (napi_get_element(env, pair, 0, &name) != napi_ok
            || napi_get_element(env, pair, 1, &value) != napi_ok
            || !readText(env, name, "a header's name", false, k)
            || !readText(env, value, "a header's value", false, v))
            return nullptr;
        names.push_back(std::move(*k));
        values.push_back(std::move(*v));
    }
    std::vector<const char*> np, vp;
    for (std::size_t i = 0; i < names.size(); ++i) {
        np.push_back(names[i].c_str());
        vp.push_back(values[i].c_str());
    }
    tollgate_error err {};
    return methodResult(env,
        tollgate_call_headers(c->m_call, static_cast<int>(status), np.data(), vp.data(), np.size(), &err),
        err);
}

napi_value NodeCall::body(napi_env env, napi_callback_info cbinfo)
{
    Args a;
    NodeCall* c = usable(env, cbinfo, a);
    const void* data = nullptr;
    size_t len = 0;
    if (!c || !readBytes(env, a.argv[0], "chunk", data, len))
        return nullptr;
    tollgate_error err {};
    return methodResult(env, tollgate_call_body(c->m_call, data, len, &err), err);
}

napi_value NodeCall::finish(napi_env env, napi_callback_info cbinfo)
{
    Args a;
    NodeCall* c = usable(env, cbinfo, a);
    bool brokenOff = false;
    if (!c || !readBool(env, a.argv[0], "brokenOff", brokenOff))
        return nullptr;
    tollgate_error err {};
    return methodResult(env, tollgate_call_finish(c->m_call, brokenOff ? 1 : 0, &err), err);
}

// info() -> { fence (a decimal string: it may pass 2^53), holdsSlot, waitedMs, tokens }
napi_value NodeCall::info(napi_env env, napi_callback_info cbinfo)
{
    Args a;
    NodeCall* c = usable(env, cbinfo, a);
    if (!c)
        return nullptr;
    napi_value out, fence, holds;
    napi_create_object(env, &out);
    napi_create_string_utf8(
        env, std::to_string(tollgate_call_fence(c->m_call)).c_str(), NAPI_AUTO_LENGTH, &fence);
    napi_get_boolean(env, tollgate_call_holds_slot(c->m_call) != 0, &holds);
    napi_set_named_property(env, out, "fence", fence);
    napi_set_named_property(env, out, "holdsSlot", holds);
    napi_set_named_property(env, out, "waitedMs", makeInt(env, tollgate_call_waited_ms(c->m_call)));
    napi_set_named_property(env, out, "tokens", makeInt(env, tollgate_call_tokens(c->m_call)));
    return out;
}

napi_value NodeCall::free(napi_env env, napi_callback_info cbinfo)
{
    Args a;
    auto* c = unwrapped(env, cbinfo, a);
    if (!c)
        return nullptr;
    if (c->m_waiting) {
        c->m_freeWhenDone = true;
        tollgate_call_cancel(c->m_call);
    } else {
        tollgate_call_free(c->m_call);
        c->m_call = nullptr;
    }
    return undefinedValue(env);
}

void NodeCall::finalize(napi_env, void* data, void*)
{
    auto* c = static_cast<NodeCall*>(data);
    if (c->m_waiting) {
        // Only at the environment's teardown (a waiting call is referenced): the pool thread may
        // still be in tollgate_call_admit, so the call is cancelled and left to the process's end.
        tollgate_call_cancel(c->m_call);
        return;
    }
    tollgate_call_free(c->m_call);
    delete c;
}

} // namespace tollgate::node
