#pragma once

// NodeCall: the JS class Call of the addon — one tollgate_call. admit() first tries on the JS
// thread (one store operation, as an end is); when there is no room and the timeout allows a
// wait, it waits on a thread of its own and settles its promise through a thread-safe function,
// so the event loop never blocks on a wait for room; cancel() ends that wait from the JS thread
// (tollgate_call_cancel, the one function any thread may call). The ends (settle, report429,
// release, the HTTP answer) are single store operations done on the JS thread, as Python's
// client does them.
//
// Why not libuv's pool (napi async work): it has 4 threads by default, and waits for room last
// seconds. Four waiting admissions would hold every one of them, and the pool also runs the
// process's file operations and DNS lookups — those of the requests that hold the slots the
// waiters wait for: the process would stall until the waits time out.
//
// Invariants:
// - The C call is used by one thread at a time: while an admission is waiting (m_waiting),
//   every method but cancel() is a StateError, and the wrapper object is kept alive by a
//   reference the admission holds, so the garbage collector cannot free the call under the
//   waiting thread.
// - free() (or the garbage collector) frees the C call: an admitted call not ended gives its
//   slot back (the library releases it). Freed while waiting, it is cancelled and freed when the
//   wait ends; at the environment's teardown a call still waiting is cancelled and left (the
//   process is ending). Any use after free() is a StateError, never a touch of freed memory.

#include "napiutil.h"
#include "tollgate.h"

#include <atomic>
#include <node_api.h>

namespace tollgate::node {

class NodeCall
{
public:
    [[nodiscard]] static napi_value defineClass(napi_env env);

private:
    struct Admission;

    static napi_value construct(napi_env env, napi_callback_info info);
    static napi_value admit(napi_env env, napi_callback_info info);
    static napi_value cancel(napi_env env, napi_callback_info info);
    static napi_value settle(napi_env env, napi_callback_info info);
    static napi_value report429(napi_env env, napi_callback_info info);
    static napi_value release(napi_env env, napi_callback_info info);
    static napi_value headers(napi_env env, napi_callback_info info);
    static napi_value body(napi_env env, napi_callback_info info);
    static napi_value finish(napi_env env, napi_callback_info info);
    static napi_value info(napi_env env, napi_callback_info info);
    static napi_value free(napi_env env, napi_callback_info info);
    static void finalize(napi_env env, void* data, void* hint);
    static void admitWait(Admission* w);
    static void admitComplete(napi_env env, napi_value callback, void* context, void* data);

    // The call wrapped in `self`, or nullptr with a TypeError pending (not a Call).
    static NodeCall* unwrapped(napi_env env, napi_value self);
    // The same, and not freed nor waiting, or nullptr with a TypeError/StateError pending.
    static NodeCall* usable(napi_env env, napi_value self);
    // The same for the object a method was called on, its arguments read into `a` first.
    static NodeCall* unwrapped(napi_env env, napi_callback_info cbinfo, Args& a);
    static NodeCall* usable(napi_env env, napi_callback_info cbinfo, Args& a);

    tollgate_call* m_call = nullptr; // owned
    bool m_waiting = false; // an admission runs on a pool thread
    bool m_freeWhenDone = false; // free() came while it waited
};

} // namespace tollgate::node
