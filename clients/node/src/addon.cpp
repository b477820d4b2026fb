// tollgate.node: the Node addon of the in-process clients, over the C library's ABI only
// (tollgate.h) and Node-API (node_api.h), so one build serves every Node version with N-API 8.
// The JS package (clients/node/index.js) is the API; this is its native half: NativeHome,
// NativeCall, the library's version and the error factory hook.

#include "napiutil.h"
#include "nodecall.h"
#include "nodehome.h"

#include <node_api.h>

namespace {

napi_value version(napi_env env, napi_callback_info)
{
    return tollgate::node::makeText(env, tollgate_version());
}

napi_value init(napi_env env, napi_value exports)
{
    using namespace tollgate::node;
    napi_value fn = nullptr;
    napi_create_function(env, "setErrorFactory", NAPI_AUTO_LENGTH, setErrorFactory, nullptr, &fn);
    napi_set_named_property(env, exports, "setErrorFactory", fn);
    napi_create_function(env, "version", NAPI_AUTO_LENGTH, version, nullptr, &fn);
    napi_set_named_property(env, exports, "version", fn);
    napi_set_named_property(env, exports, "NativeHome", NodeHome::defineClass(env));
    napi_set_named_property(env, exports, "NativeCall", NodeCall::defineClass(env));
    return exports;
}

} // namespace

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
