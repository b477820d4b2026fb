#pragma once

// offload(): the one way the proxy's coroutines hand blocking work to another thread.
// Runs `fn` on `ex` (a store thread), or on a thread of its own when `ex` is empty, and
// resumes the calling coroutine on its own executor once it returned (rethrowing what it
// threw). No thread to be had: the coroutine gets the std::system_error.
// (The initiation is a named local that holds only pointers: GCC 12 destroyed a temporary
// lambda holding the executor twice at the end of the co_await's full-expression.)
//
// Invariant: the calling coroutine is suspended until `fn` returned, so the two never touch
// the connection at once; `fn` is referred to, not copied (it lives in the coroutine's frame).

#include "proxy/netcommon.h"

#include <exception>
#include <memory>
#include <system_error>
#include <thread>

namespace tollgate::proxy {

template <class Fn> net::awaitable<void> offload(net::any_io_executor ex, Fn& fn)
{
    auto initiate = [exAt = &ex, fnAt = &fn](auto handler) {
        using Handler = decltype(handler);
        const net::any_io_executor& target = *exAt;
        struct Job
        {
            Handler handler;
            Fn& fn;
            void complete(std::exception_ptr error)
            {
                auto back = net::get_associated_executor(handler);
                net::post(back, [h = std::move(handler), error]() mutable { std::move(h)(error); });
            }
            void run()
            {
                std::exception_ptr error;
                try {
                    fn();
                } catch (...) {
                    error = std::current_exception();
                }
                complete(error);
            }
        };
        auto job = std::make_shared<Job>(Job { std::move(handler), *fnAt });
        if (target) {
            net::post(target, [job] { job->run(); });
            return;
        }
        try {
            std::thread([job] { job->run(); }).detach();
        } catch (const std::system_error&) {
            job->complete(std::current_exception());
        }
    };
    co_await net::async_initiate<const net::use_awaitable_t<>, void(std::exception_ptr)>(
        initiate, net::use_awaitable);
}

} // namespace tollgate::proxy
