#include "nodehome.h"

#include "napiutil.h"

#include <optional>
#include <string>

namespace tollgate::node {

namespace {

// Tells a NodeHome from another wrapped object (a Call passed where a Home belongs).
constexpr napi_type_tag HOME_TAG = { 0x746f6c6c67617465ULL, 0x486f6d6500000001ULL };

NodeHome* unwrapHome(napi_env env, napi_value object)
{
    bool tagged = false;
    void* p = nullptr;
    if (napi_check_object_type_tag(env, object, &HOME_TAG, &tagged) != napi_ok || !tagged
        || napi_unwrap(env, object, &p) != napi_ok || !p) {
        bool pending = false;
        napi_is_exception_pending(env, &pending);
        if (pending) {
            napi_value ignored;
            napi_get_and_clear_last_exception(env, &ignored);
        }
        throwType(env, "tollgate: not a Home");
        return nullptr;
    }
    return static_cast<NodeHome*>(p);
}

} // namespace

napi_value NodeHome::defineClass(napi_env env)
{
    const napi_property_descriptor methods[] = {
        { "close", nullptr, close, nullptr, nullptr, nullptr, napi_default, nullptr },
        { "text", nullptr, text, nullptr, nullptr, nullptr, napi_default, nullptr },
        { "statusJson", nullptr, statusJson, nullptr, nullptr, nullptr, napi_default, nullptr },
    };
    napi_value cls = nullptr;
    napi_define_class(env, "NativeHome", NAPI_AUTO_LENGTH, construct, nullptr,
        sizeof methods / sizeof methods[0], methods, &cls);
    return cls;
}

tollgate_home* NodeHome::live(napi_env env, napi_value object)
{
    NodeHome* h = unwrapHome(env, object);
    if (!h)
        return nullptr;
    if (!h->m_home) {
        throwCode(env, TOLLGATE_E_CLOSED, "tollgate: the home was closed");
        return nullptr;
    }
    return h->m_home;
}

napi_value NodeHome::construct(napi_env env, napi_callback_info info)
{
    Args a;
    if (!readArgs(env, info, a))
        return nullptr;
    std::optional<std::string> where;
    if (!readText(env, a.argv[0], "home", true, where))
        return nullptr;
    tollgate_error err {};
    tollgate_home* home = nullptr;
    const int rc = tollgate_home_open(where ? where->c_str() : nullptr, &home, &err);
    if (rc != TOLLGATE_OK) {
        throwStatus(env, rc, err);
        return nullptr;
    }
    auto* self = new NodeHome;
    self->m_home = home;
    if (napi_wrap(env, a.self, self, finalize, nullptr, nullptr) != napi_ok) {
        tollgate_home_close(home);
        delete self;
        return nullptr;
    }
    napi_type_tag_object(env, a.self, &HOME_TAG);
    return a.self;
}

napi_value NodeHome::close(napi_env env, napi_callback_info info)
{
    Args a;
    if (!readArgs(env, info, a))
        return nullptr;
    NodeHome* h = unwrapHome(env, a.self);
    if (!h)
        return nullptr;
    tollgate_home_close(h->m_home);
    h->m_home = nullptr;
    return undefinedValue(env);
}

napi_value NodeHome::text(napi_env env, napi_callback_info info)
{
    Args a;
    if (!readArgs(env, info, a))
        return nullptr;
    tollgate_home* home = live(env, a.self);
    return home ? makeText(env, tollgate_home_text(home)) : nullptr;
}

napi_value NodeHome::statusJson(napi_env env, napi_callback_info info)
{
    Args a;
    if (!readArgs(env, info, a))
        return nullptr;
    tollgate_home* home = live(env, a.self);
    if (!home)
        return nullptr;
    char* json = nullptr;
    tollgate_error err {};
    const int rc = tollgate_status_json(home, &json, &err);
    if (rc != TOLLGATE_OK) {
        throwStatus(env, rc, err);
        return nullptr;
    }
    napi_value out = makeText(env, json);
    tollgate_string_free(json);
    return out;
}

void NodeHome::finalize(napi_env, void* data, void*)
{
    auto* h = static_cast<NodeHome*>(data);
    tollgate_home_close(h->m_home);
    delete h;
}

} // namespace tollgate::node
