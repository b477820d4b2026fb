#include "napiutil.h"

#include <cmath>
#include <cstring>

namespace tollgate::node {

namespace {

constexpr double MAX_SAFE = 9007199254740991.0;

// The factory of lib/errors.js, per environment (a worker thread has its own).
struct AddonData
{
    napi_ref factory = nullptr;
};

AddonData* addonData(napi_env env)
{
    void* data = nullptr;
    if (napi_get_instance_data(env, &data) == napi_ok && data)
        return static_cast<AddonData*>(data);
    auto* d = new AddonData;
    napi_set_instance_data(
        env, d,
        [](napi_env e, void* p, void*) {
            auto* a = static_cast<AddonData*>(p);
            if (a->factory)
                napi_delete_reference(e, a->factory);
            delete a;
        },
        nullptr);
    return d;
}

const char* typeName(napi_env env, napi_value v)
{
    napi_valuetype t = napi_undefined;
    napi_typeof(env, v, &t);
    switch (t) {
    case napi_undefined:
        return "undefined";
    case napi_null:
        return "null";
    case napi_boolean:
        return "boolean";
    case napi_number:
        return "number";
    case napi_string:
        return "string";
    case napi_symbol:
        return "symbol";
    case napi_object:
        return "object";
    case napi_function:
        return "function";
    case napi_external:
        return "external";
    case napi_bigint:
        return "bigint";
    }
    return "unknown";
}

} // namespace

bool readArgs(napi_env env, napi_callback_info info, Args& out)
{
    out.argc = 8;
    if (napi_get_cb_info(env, info, &out.argc, out.argv, &out.self, &out.data) != napi_ok)
        return false;
    for (size_t i = out.argc; i < 8; ++i)
        napi_get_undefined(env, &out.argv[i]);
    return true;
}

void throwType(napi_env env, const std::string& message)
{
    napi_throw_type_error(env, nullptr, message.c_str());
}

void throwRange(napi_env env, const std::string& message)
{
    napi_throw_range_error(env, nullptr, message.c_str());
}

bool readText(napi_env env, napi_value v, const char* name, bool optional, std::optional<std::string>& out)
{
    napi_valuetype t = napi_undefined;
    napi_typeof(env, v, &t);
    if (optional && (t == napi_undefined || t == napi_null)) {
        out.reset();
        return true;
    }
    if (t != napi_string) {
        throwType(env, std::string("tollgate: ") + name + " must be a string, not " + typeName(env, v));
        return false;
    }
    size_t len = 0;
    if (napi_get_value_string_utf8(env, v, nullptr, 0, &len) != napi_ok)
        return false;
    std::string s(len, '\0');
    if (napi_get_value_string_utf8(env, v, s.data(), len + 1, &len) != napi_ok)
        return false;
    s.resize(len);
    if (s.find('\0') != std::string::npos) {
        throwCode(env, TOLLGATE_E_USAGE, std::string("tollgate: ") + name + " holds a NUL character");
        return false;
    }
    out = std::move(s);
    return true;
}

bool readCount(napi_env env, napi_value v, const char* name, std::int64_t min, std::int64_t& out)
{
    napi_valuetype t = napi_undefined;
    napi_typeof(env, v, &t);
    if (t != napi_number) {
        throwType(env, std::string("tollgate: ") + name + " must be a number, not " + typeName(env, v));
        return false;
    }
    double d = 0;
    napi_get_value_double(env, v, &d);
    if (!std::isfinite(d) || std::floor(d) != d || d < static_cast<double>(min) || d > MAX_SAFE) {
        throwRange(env,
            std::string("tollgate: ") + name + " must be a whole number from " + std::to_string(min)
                + " to Number.MAX_SAFE_INTEGER");
        return false;
    }
    out = static_cast<std::int64_t>(d);
    return true;
}

bool readBool(napi_env env, napi_value v, const char* name, bool& out)
{
    napi_valuetype t = napi_undefined;
    napi_typeof(env, v, &t);
    if (t != napi_boolean) {
        throwType(env, std::string("tollgate: ") + name + " must be a boolean, not " + typeName(env, v));
        return false;
    }
    return napi_get_value_bool(env, v, &out) == napi_ok;
}

bool readBytes(napi_env env, napi_value v, const char* name, const void*& data, size_t& len)
{
    bool is = false;
    void* p = nullptr;
    if (napi_is_typedarray(env, v, &is) == napi_ok && is) {
        napi_typedarray_type type;
        size_t count = 0;
        napi_value buffer;
        size_t offset = 0;
        if (napi_get_typedarray_info(env, v, &type, &count, &p, &buffer, &offset) != napi_ok)
            return false;
        size_t width = 1;
        switch (type) {
        case napi_int16_array:
        case napi_uint16_array:
            width = 2;
            break;
        case napi_int32_array:
        case napi_uint32_array:
        case napi_float32_array:
            width = 4;
            break;
        case napi_float64_array:
        case napi_bigint64_array:
        case napi_biguint64_array:
            width = 8;
            break;
        default:
            break;
        }
        data = p;
        len = count * width;
        return true;
    }
    if (napi_is_dataview(env, v, &is) == napi_ok && is) {
        napi_value buffer;
        size_t offset = 0;
        if (napi_get_dataview_info(env, v, &len, &p, &buffer, &offset) != napi_ok)
            return false;
        data = p;
        return true;
    }
    if (napi_is_arraybuffer(env, v, &is) == napi_ok && is) {
        if (napi_get_arraybuffer_info(env, v, &p, &len) != napi_ok)
            return false;
        data = p;
        return true;
    }
    throwType(env,
        std::string("tollgate: ") + name + " must be a Buffer, a TypedArray or an ArrayBuffer, not "
            + typeName(env, v));
    return false;
}

napi_value makeInt(napi_env env, std::int64_t v)
{
    napi_value out = nullptr;
    napi_create_int64(env, v, &out);
    return out;
}

napi_value makeText(napi_env env, const char* s)
{
    napi_value out = nullptr;
    napi_create_string_utf8(env, s ? s : "", NAPI_AUTO_LENGTH, &out);
    return out;
}

napi_value undefinedValue(napi_env env)
{
    napi_value out = nullptr;
    napi_get_undefined(env, &out);
    return out;
}

napi_value statusError(napi_env env, int code, const tollgate_error& err)
{
    const std::string message(err.message, strnlen(err.message, sizeof err.message));
    napi_value args[5] = { makeInt(env, code), makeText(env, tollgate_status_name(code)),
        makeText(env, message.c_str()), makeInt(env, err.sys_errno), makeInt(env, err.retry_after_ms) };
    napi_value factory = nullptr;
    napi_value error = nullptr;
    AddonData* d = addonData(env);
    if (d->factory && napi_get_reference_value(env, d->factory, &factory) == napi_ok && factory) {
        napi_value global;
        napi_get_global(env, &global);
        if (napi_call_function(env, global, factory, 5, args, &error) == napi_ok && error)
            return error;
        // A factory that threw: its exception is dropped for a plain Error below.
        bool pending = false;
        if (napi_is_exception_pending(env, &pending) == napi_ok && pending) {
            napi_value ignored;
            napi_get_and_clear_last_exception(env, &ignored);
        }
    }
    napi_create_error(env, args[1], args[2], &error);
    return error;
}

void throwStatus(napi_env env, int code, const tollgate_error& err)
{
    napi_throw(env, statusError(env, code, err));
}

void throwCode(napi_env env, int code, const std::string& message)
{
    tollgate_error err {};
    err.code = code;
    err.retry_after_ms = -1;
    std::strncpy(err.message, message.c_str(), sizeof err.message - 1);
    throwStatus(env, code, err);
}

napi_value setErrorFactory(napi_env env, napi_callback_info info)
{
    Args a;
    if (!readArgs(env, info, a))
        return nullptr;
    napi_valuetype t = napi_undefined;
    napi_typeof(env, a.argv[0], &t);
    if (t != napi_function) {
        throwType(env, "tollgate: the error factory must be a function");
        return nullptr;
    }
    AddonData* d = addonData(env);
    if (d->factory)
        napi_delete_reference(env, d->factory);
    napi_create_reference(env, a.argv[0], 1, &d->factory);
    return undefinedValue(env);
}

} // namespace tollgate::node
