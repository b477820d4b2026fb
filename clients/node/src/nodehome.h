#pragma once

// NodeHome: the JS class Home of the addon — an open tollgate_home. close() frees it at once
// (later use is a ClosedError; calls made from it answer ClosedError from the library and still
// give their slots back when freed); otherwise the garbage collector frees it.

#include "tollgate.h"

#include <node_api.h>

namespace tollgate::node {

class NodeHome
{
public:
    [[nodiscard]] static napi_value defineClass(napi_env env);
    // The open home of a JS Home object; a ClosedError (or TypeError) pending when there is none.
    [[nodiscard]] static tollgate_home* live(napi_env env, napi_value object);

private:
    static napi_value construct(napi_env env, napi_callback_info info);
    static napi_value close(napi_env env, napi_callback_info info);
    static napi_value text(napi_env env, napi_callback_info info);
    static napi_value statusJson(napi_env env, napi_callback_info info);
    static void finalize(napi_env env, void* data, void* hint);

    tollgate_home* m_home = nullptr; // owned; null once closed
};

} // namespace tollgate::node
