#pragma once

// Helpers of the Node addon over Node-API (node_api.h): arguments read with their types
// checked (a wrong type is a TypeError, a bad number a RangeError, thrown into JS, never a
// crash), and the library's failures thrown as the JS classes of lib/errors.js (made by the
// factory the JS side registers with setErrorFactory).
//
// Every function returns false (or nullptr) with a JS exception pending when it failed; the
// caller then returns nullptr to JS at once.

#include "tollgate.h"

#include <cstdint>
#include <node_api.h>
#include <optional>
#include <string>
#include <vector>

namespace tollgate::node {

// The arguments of a callback (at most 8) and its `this`.
struct Args
{
    napi_value self = nullptr;
    napi_value argv[8] = {};
    size_t argc = 8;
    void* data = nullptr;
};
[[nodiscard]] bool readArgs(napi_env env, napi_callback_info info, Args& out);

// A string (UTF-8), or nothing for undefined/null when `optional`.
[[nodiscard]] bool readText(
    napi_env env, napi_value v, const char* name, bool optional, std::optional<std::string>& out);
// A whole number in [min, Number.MAX_SAFE_INTEGER].
[[nodiscard]] bool readCount(
    napi_env env, napi_value v, const char* name, std::int64_t min, std::int64_t& out);
[[nodiscard]] bool readBool(napi_env env, napi_value v, const char* name, bool& out);
// A Buffer, a TypedArray or an ArrayBuffer: its bytes (valid while `v` is alive).
[[nodiscard]] bool readBytes(napi_env env, napi_value v, const char* name, const void*& data, size_t& len);

void throwType(napi_env env, const std::string& message);
void throwRange(napi_env env, const std::string& message);
// The library's failure as a Tollgate error (lib/errors.js).
void throwStatus(napi_env env, int code, const tollgate_error& err);
// The same error as a value (to reject a promise with).
[[nodiscard]] napi_value statusError(napi_env env, int code, const tollgate_error& err);
// A Tollgate error of `code` with `message` (no library call behind it: a closed home, a call
// used while it waits).
void throwCode(napi_env env, int code, const std::string& message);

// Registers the JS factory: (code, kind, message, errno, retryAfterMs) -> Error.
napi_value setErrorFactory(napi_env env, napi_callback_info info);

[[nodiscard]] napi_value makeInt(napi_env env, std::int64_t v);
[[nodiscard]] napi_value makeText(napi_env env, const char* s);
[[nodiscard]] napi_value undefinedValue(napi_env env);

} // namespace tollgate::node
