// The C ABI of the library: each function turns its arguments into the core's, runs the
// operation on a CapiHome or CapiCall, and fills the caller's tollgate_error. Nothing throws
// across this boundary: every function that can fail catches at its edge (an allocation that
// fails, a defect) and answers TOLLGATE_E_INTERNAL.

#include "tollgate.h"

#include "backend/quotalimiter.h"
#include "capicall.h"
#include "capihome.h"
#include "capistatus.h"
#include "provider/requestestimate.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>

using tollgate::ErrorKind;
using tollgate::capi::CapiCall;
using tollgate::capi::CapiHome;
using tollgate::capi::CapiStatus;

static_assert(static_cast<int>(ErrorKind::Usage) + TOLLGATE_E_USAGE == TOLLGATE_E_USAGE);
static_assert(static_cast<int>(ErrorKind::Timeout) + TOLLGATE_E_USAGE == TOLLGATE_E_TIMEOUT);
static_assert(static_cast<int>(ErrorKind::Unsupported) + TOLLGATE_E_USAGE == TOLLGATE_E_UNSUPPORTED);

struct tollgate_home
{
    std::shared_ptr<CapiHome> home;
};

struct tollgate_call
{
    std::unique_ptr<CapiCall> call;
};

namespace {

int answer(const CapiStatus& s, tollgate_error* err)
{
    if (err) {
        err->code = s.code;
        err->sys_errno = s.sysErrno;
        err->retry_after_ms = s.retryAfterMs;
        const std::size_t n = std::min(s.message.size(), sizeof err->message - 1);
        std::memcpy(err->message, s.message.data(), n);
        err->message[n] = '\0';
    }
    return s.code;
}

int usage(const std::string& message, tollgate_error* err)
{
    return answer(CapiStatus::make(TOLLGATE_E_USAGE, message), err);
}

// Runs `op` (returning a CapiStatus), answering what it throws as TOLLGATE_E_INTERNAL.
template <class Op> int guarded(tollgate_error* err, Op op)
{
    try {
        return answer(op(), err);
    } catch (const std::bad_alloc&) {
        return answer(CapiStatus::make(TOLLGATE_E_INTERNAL, "out of memory"), err);
    } catch (const std::exception& e) {
        return answer(CapiStatus::make(TOLLGATE_E_INTERNAL, std::string("internal error: ") + e.what()), err);
    } catch (...) {
        return answer(CapiStatus::make(TOLLGATE_E_INTERNAL, "internal error"), err);
    }
}

CapiStatus forkedHome(const CapiHome& home)
{
    return CapiStatus::make(TOLLGATE_E_FORKED,
        home.text() + ": the home was opened by process " + std::to_string(home.ownerPid())
            + ", not this one (after fork(), open the home again in the child)");
}

// A call's owner (the home handle) checks of tollgate_call_new*.
CapiStatus homeUsable(const tollgate_home* home)
{
    if (home->home->forked())
        return forkedHome(*home->home);
    return {};
}

// The provider and caller as the CLI takes them: a provider is required, the caller sanitised.
CapiStatus namesOf(const char* provider, const char* caller, std::string& callerOut)
{
    if (!provider || !*provider)
        return CapiStatus::make(TOLLGATE_E_USAGE, "no provider named");
    callerOut = tollgate::QuotaLimiter::sanitizeCaller(caller && *caller ? caller : "c");
    return {};
}

} // namespace

extern "C" {

const char* tollgate_version(void)
{
    return TOLLGATE_VERSION_STRING;
}

const char* tollgate_status_name(int code)
{
    switch (code) {
    case TOLLGATE_OK:
        return "ok";
    case TOLLGATE_E_USAGE:
        return "usage";
    case TOLLGATE_E_NOT_FOUND:
        return "not_found";
    case TOLLGATE_E_PERMISSION:
        return "permission";
    case TOLLGATE_E_IO:
        return "io";
    case TOLLGATE_E_CORRUPT:
        return "corrupt";
    case TOLLGATE_E_BUSY:
        return "busy";
    case TOLLGATE_E_TIMEOUT:
        return "timeout";
    case TOLLGATE_E_UNSUPPORTED:
        return "unsupported";
    case TOLLGATE_E_REFUSED:
        return "refused";
    case TOLLGATE_E_CANCELLED:
        return "cancelled";
    case TOLLGATE_E_STATE:
        return "state";
    case TOLLGATE_E_CLOSED:
        return "closed";
    case TOLLGATE_E_FORKED:
        return "forked";
    case TOLLGATE_E_INTERNAL:
        return "internal";
    default:
        return "unknown";
    }
}

int tollgate_home_open(const char* home, tollgate_home** out, tollgate_error* err)
{
    if (!out)
        return usage("tollgate_home_open: no place for the home (out is NULL)", err);
    *out = nullptr;
    return guarded(err, [&] {
        auto h = CapiHome::open(home ? home : "");
        if (!h)
            return CapiStatus::of(h.error());
        *out = new tollgate_home { std::move(h).value() };
        return CapiStatus {};
    });
}

void tollgate_home_close(tollgate_home* home)
{
    if (!home)
        return;
    try {
        home->home->close();
        delete home;
    } catch (...) {
        // A destructor that throws is a defect; nothing crosses the boundary.
    }
}

const char* tollgate_home_text(const tollgate_home* home)
{
    return home ? home->home->text().c_str() : "";
}

int tollgate_status_json(tollgate_home* home, char** json, tollgate_error* err)
{
    if (!home || !json)
        return usage("tollgate_status_json: the home or the place for the text is NULL", err);
    *json = nullptr;
    return guarded(err, [&] {
        if (auto s = homeUsable(home); !s.ok())
            return s;
        auto text = home->home->statusJson();
        if (!text)
            return CapiStatus::of(text.error());
        char* copy = static_cast<char*>(std::malloc(text->size() + 1));
        if (!copy)
            return CapiStatus::make(TOLLGATE_E_INTERNAL, "out of memory");
        std::memcpy(copy, text->c_str(), text->size() + 1);
        *json = copy;
        return CapiStatus {};
    });
}

void tollgate_string_free(char* s)
{
    std::free(s);
}

int tollgate_call_new(tollgate_home* home, const char* provider, const char* caller, const char* model,
    int64_t input_tokens, int64_t output_tokens, int flags, tollgate_call** out, tollgate_error* err)
{
    if (!home || !out)
        return usage("tollgate_call_new: the home or the place for the call is NULL", err);
    *out = nullptr;
    return guarded(err, [&] {
        if (auto s = homeUsable(home); !s.ok())
            return s;
        std::string who;
        if (auto s = namesOf(provider, caller, who); !s.ok())
            return s;
        if (input_tokens < 0 || output_tokens < 0)
            return CapiStatus::make(TOLLGATE_E_USAGE,
                "a negative token count (input " + std::to_string(input_tokens) + ", output "
                    + std::to_string(output_tokens) + ")");
        if ((flags & ~TOLLGATE_SLOT) != 0)
            return CapiStatus::make(TOLLGATE_E_USAGE, "unknown flags " + std::to_string(flags));
        // As the CLI's --model: a name that goes into the state and every history line (a 4 MB
        // or control-byte name made lines no reader takes, and the admission vanished from it).
        if (model && *model) {
            if (!tollgate::QuotaLimits::validateName("model", model).ok())
                return CapiStatus::make(TOLLGATE_E_USAGE,
                    "a model name is 1 to 64 letters, digits and . _ - : @ (as the CLI's --model)");
        }
        tollgate::RequestEstimate estimate;
        estimate.json = true;
        estimate.model = model ? model : "";
        estimate.inputTokens = input_tokens;
        estimate.maxOutputTokens = output_tokens;
        tollgate::AdmitRequest ask = home->home->exchange(provider).askFor(estimate, who);
        ask.wantsSlot = (flags & TOLLGATE_SLOT) != 0;
        *out = new tollgate_call { std::make_unique<CapiCall>(home->home, std::move(ask), input_tokens) };
        return CapiStatus {};
    });
}

int tollgate_call_new_http(tollgate_home* home, const char* provider, const char* caller, const void* body,
    size_t body_len, tollgate_call** out, tollgate_error* err)
{
    if (!home || !out || (!body && body_len > 0))
        return usage("tollgate_call_new_http: the home, the body or the place for the call is NULL", err);
    *out = nullptr;
    return guarded(err, [&] {
        if (auto s = homeUsable(home); !s.ok())
            return s;
        std::string who;
        if (auto s = namesOf(provider, caller, who); !s.ok())
            return s;
        const auto estimate
            = tollgate::RequestEstimate::of(std::string_view(static_cast<const char*>(body), body_len));
        if (!estimate.repeated.empty())
            return CapiStatus::make(TOLLGATE_E_USAGE,
                "the request body names '" + estimate.repeated
                    + "' twice (which one the provider would take is not known)");
        tollgate::AdmitRequest ask = home->home->exchange(provider).askFor(estimate, who);
        *out = new tollgate_call { std::make_unique<CapiCall>(
            home->home, std::move(ask), estimate.inputTokens) };
        return CapiStatus {};
    });
}

int tollgate_call_admit(tollgate_call* call, int64_t timeout_ms, tollgate_error* err)
{
    if (!call)
        return usage("tollgate_call_admit: the call is NULL", err);
    return guarded(err, [&] { return call->call->admit(timeout_ms); });
}

void tollgate_call_cancel(tollgate_call* call)
{
    if (call)
        call->call->cancel();
}

int tollgate_call_settle(
    tollgate_call* call, int64_t input_tokens, int64_t output_tokens, tollgate_error* err)
{
    if (!call)
        return usage("tollgate_call_settle: the call is NULL", err);
    return guarded(err, [&] { return call->call->settle(input_tokens, output_tokens); });
}

int tollgate_call_report_429(tollgate_call* call, int64_t retry_after_ms, tollgate_error* err)
{
    if (!call)
        return usage("tollgate_call_report_429: the call is NULL", err);
    return guarded(err, [&] { return call->call->report429(retry_after_ms); });
}

int tollgate_call_release(tollgate_call* call, tollgate_error* err)
{
    if (!call)
        return usage("tollgate_call_release: the call is NULL", err);
    return guarded(err, [&] { return call->call->release(); });
}

int tollgate_call_headers(tollgate_call* call, int status, const char* const* names,
    const char* const* values, size_t count, tollgate_error* err)
{
    if (!call || (count > 0 && (!names || !values)))
        return usage("tollgate_call_headers: the call or the headers are NULL", err);
    return guarded(err, [&] {
        tollgate::HttpHeaders headers;
        headers.reserve(count);
        for (size_t i = 0; i < count; ++i) {
            if (!names[i] || !values[i])
                return CapiStatus::make(TOLLGATE_E_USAGE, "header " + std::to_string(i) + " is NULL");
            headers.emplace_back(names[i], values[i]);
        }
        return call->call->headers(status, std::move(headers));
    });
}

int tollgate_call_body(tollgate_call* call, const void* chunk, size_t len, tollgate_error* err)
{
    if (!call || (!chunk && len > 0))
        return usage("tollgate_call_body: the call or the chunk is NULL", err);
    return guarded(
        err, [&] { return call->call->body(std::string_view(static_cast<const char*>(chunk), len)); });
}

int tollgate_call_finish(tollgate_call* call, int broken_off, tollgate_error* err)
{
    if (!call)
        return usage("tollgate_call_finish: the call is NULL", err);
    return guarded(err, [&] { return call->call->finish(broken_off != 0); });
}

uint64_t tollgate_call_fence(const tollgate_call* call)
{
    return call ? call->call->fence() : 0;
}

int tollgate_call_holds_slot(const tollgate_call* call)
{
    return call && call->call->holdsSlot() ? 1 : 0;
}

int64_t tollgate_call_waited_ms(const tollgate_call* call)
{
    return call ? call->call->waitedMs() : 0;
}

int64_t tollgate_call_tokens(const tollgate_call* call)
{
    return call ? call->call->tokens() : 0;
}

void tollgate_call_free(tollgate_call* call)
{
    try {
        delete call;
    } catch (...) {
        // See tollgate_home_close.
    }
}

} // extern "C"
