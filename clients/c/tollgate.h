/* tollgate.h: Tollgate in-process — the shared quota of a Tollgate home (a directory or a
 * redis:// URL) from C, with the same semantics as the `tollgate` CLI and `tollgate proxy`
 * (the same core code: the admission loop of `tollgate acquire`, the exchange logic of the
 * proxy). Link with `pkg-config --cflags --libs tollgate`.
 *
 * The model: open a home once (tollgate_home_open), then per call to the provider
 *   tollgate_call_new      what the call asks for (provider, caller, model, tokens, a slot)
 *   tollgate_call_admit    wait for room until a timeout (tollgate_call_cancel ends it early)
 *   ...the request to the provider...
 *   tollgate_call_settle   the real usage (a success), or
 *   tollgate_call_report_429 / tollgate_call_release (given up: the estimate stands)
 *   tollgate_call_free
 * or, for an HTTP layer, tollgate_call_new_http (the estimate from the request's JSON body, as
 * the proxy makes it), tollgate_call_headers + tollgate_call_body + tollgate_call_finish (what
 * the answer says: its rate-limit headers, a 429 and its Retry-After, its real usage).
 *
 * Errors: every function that can fail returns a status code (TOLLGATE_OK is 0) and, when `err`
 * is not NULL, fills it: the code, errno, and a message naming the file or URL concerned.
 * Nothing throws across this boundary; running out of memory is TOLLGATE_E_INTERNAL.
 *
 * Threads: a home is shared by any number of threads (every tollgate_home_* and
 * tollgate_call_new* function is thread-safe). A call is used by one thread at a time, except
 * tollgate_call_cancel, which any thread may call at any time until tollgate_call_free.
 *
 * fork(): a home (and its calls) belongs to the process that opened it. In a child every
 * function on it returns TOLLGATE_E_FORKED (nothing of the parent's is used or given back);
 * tollgate_home_close and tollgate_call_free in the child free only the child's memory. Open the
 * home again in the child. A slot held across the fork stays the parent's.
 *
 * Closing: tollgate_home_close may come before the calls' tollgate_call_free; such calls
 * answer TOLLGATE_E_CLOSED from then on, and tollgate_call_free still gives their slot back.
 */
#ifndef TOLLGATE_H
#define TOLLGATE_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define TOLLGATE_API __attribute__((visibility("default")))
#else
#define TOLLGATE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define TOLLGATE_VERSION_MAJOR 0
#define TOLLGATE_VERSION_MINOR 1

/* Status codes. 1-8 are the core's error kinds. */
enum {
    TOLLGATE_OK = 0,
    TOLLGATE_E_USAGE = 1, /* an invalid argument (a NULL, a negative count, an unknown provider) */
    TOLLGATE_E_NOT_FOUND = 2, /* the home or something in it does not exist */
    TOLLGATE_E_PERMISSION = 3, /* EACCES/EPERM, or an unsafe owner or mode */
    TOLLGATE_E_IO = 4, /* any other system or network failure (Redis unreachable) */
    TOLLGATE_E_CORRUPT = 5, /* a file or key that does not parse */
    TOLLGATE_E_BUSY = 6, /* held by someone else */
    TOLLGATE_E_TIMEOUT = 7, /* admit: no room before the timeout (or a store's lock held past it) */
    TOLLGATE_E_UNSUPPORTED = 8, /* the filesystem or platform lacks what is needed */
    TOLLGATE_E_REFUSED = 9, /* admit: refused before the timeout — paused, or the earliest
                               admission lies beyond it (err->retry_after_ms says when) */
    TOLLGATE_E_CANCELLED = 10, /* admit: tollgate_call_cancel ended the wait */
    TOLLGATE_E_STATE = 11, /* a call used out of turn (admitted twice, settled after settling) */
    TOLLGATE_E_CLOSED = 12, /* the call's home was closed */
    TOLLGATE_E_FORKED = 13, /* the home was opened by another process (before a fork) */
    TOLLGATE_E_INTERNAL = 14 /* out of memory, or a defect */
};

typedef struct tollgate_error
{
    int code; /* the status code returned */
    int sys_errno; /* 0 when not from a system call */
    /* A refusal (TIMEOUT, REFUSED): when the quota could admit, in ms from now, as the policy
     * names it (a backoff's end, a window's room); -1 when no time ends the wait (a pause, a
     * queue ahead, slots held). */
    int64_t retry_after_ms;
    char message[1024]; /* "PATH: what went wrong (strerror)", NUL-terminated, may be cut */
} tollgate_error;

typedef struct tollgate_home tollgate_home;
typedef struct tollgate_call tollgate_call;

/* Flags of tollgate_call_new. */
#define TOLLGATE_SLOT 1 /* hold a parallel slot from admission to settle/release/free */

/* "0.1.0". Thread-safe. */
TOLLGATE_API const char* tollgate_version(void);
/* "timeout", "refused", ... for a status code; "unknown" otherwise. Thread-safe. */
TOLLGATE_API const char* tollgate_status_name(int code);

/* Opens a home: a directory or redis://[user@]host[:port][/db][?prefix=NAME] (the password from
 * TOLLGATE_REDIS_PASSWORD or TOLLGATE_REDIS_PASSWORD_FILE); NULL or "": TOLLGATE_HOME, else the
 * default home (as the CLI). A directory is created (0700) when missing, as the CLI does.
 * Thread-safe. */
TOLLGATE_API int tollgate_home_open(const char* home, tollgate_home** out, tollgate_error* err);
/* Frees the home (NULL: nothing). Calls not yet freed keep what they need (see above). Not
 * to be called while another thread uses the same home handle. */
TOLLGATE_API void tollgate_home_close(tollgate_home* home);
/* The home as shown (the directory, or the URL without a password): valid until close.
 * Thread-safe. */
TOLLGATE_API const char* tollgate_home_text(const tollgate_home* home);
/* The status of the home as `tollgate status --json` prints it; *json is NUL-terminated, to be
 * freed with tollgate_string_free. Thread-safe. */
TOLLGATE_API int tollgate_status_json(tollgate_home* home, char** json, tollgate_error* err);
/* Thread-safe. */
TOLLGATE_API void tollgate_string_free(char* s);

/* A call that states its cost: input_tokens (its prompt) and output_tokens (its max_tokens),
 * each >= 0; `model` may be NULL (no per-model limits); `caller` NULL: "c". The cost is an
 * estimate, as the proxy's: one above a token limit is never refused as too large, it waits
 * for an empty window (its real usage corrects it). Nothing is taken
 * until tollgate_call_admit. Thread-safe (on the home). */
TOLLGATE_API int tollgate_call_new(tollgate_home* home, const char* provider, const char* caller,
    const char* model, int64_t input_tokens, int64_t output_tokens, int flags, tollgate_call** out,
    tollgate_error* err);
/* A call estimated from the HTTP request's JSON body as `tollgate proxy` estimates it (model,
 * prompt size, max_tokens); it holds a parallel slot. Thread-safe (on the home). */
TOLLGATE_API int tollgate_call_new_http(tollgate_home* home, const char* provider, const char* caller,
    const void* body, size_t body_len, tollgate_call** out, tollgate_error* err);

/* Waits until admitted, at most timeout_ms (0: a try; the wait in the quota's FIFO queue is
 * that of `tollgate acquire --timeout`). TOLLGATE_E_TIMEOUT, _REFUSED, _CANCELLED: nothing
 * taken. One thread per call. */
TOLLGATE_API int tollgate_call_admit(tollgate_call* call, int64_t timeout_ms, tollgate_error* err);
/* Ends a wait in tollgate_call_admit (now or when it starts) with TOLLGATE_E_CANCELLED. Any
 * thread, any time before tollgate_call_free; async-signal-safe (a store of an atomic flag).
 * The waiter notices within 10 ms (it looks at the flag that often while it waits). */
TOLLGATE_API void tollgate_call_cancel(tollgate_call* call);

/* The end of an admitted call that succeeded, with its real usage (each >= 0; -1: not known,
 * the estimate stands): the slot back, the usage replacing the estimate in the window, the
 * 429 count reset — one store operation. Then the call is done. One thread per call. */
TOLLGATE_API int tollgate_call_settle(
    tollgate_call* call, int64_t input_tokens, int64_t output_tokens, tollgate_error* err);
/* The end of an admitted call the provider answered 429: the slot back, the 429 reported for
 * every caller (a backoff: retry_after_ms from its Retry-After, or -1 for none). One thread per
 * call. */
TOLLGATE_API int tollgate_call_report_429(tollgate_call* call, int64_t retry_after_ms, tollgate_error* err);
/* The end of an admitted call given up before any answer: the slot back, the estimate stands,
 * no success. One thread per call. */
TOLLGATE_API int tollgate_call_release(tollgate_call* call, tollgate_error* err);

/* The HTTP answer, as the proxy reads it: its status and headers (names case-insensitive) when
 * they arrive — the provider's rate-limit headers are acted on at once (a hold, its reported
 * limits) — then its body, chunk by chunk (the usage is read from JSON or server-sent events),
 * then tollgate_call_finish settles as the answer says (a 2xx with its real usage, a 429 with
 * its Retry-After, a spend cap pauses, ...). One thread per call (each of the three). */
TOLLGATE_API int tollgate_call_headers(tollgate_call* call, int status, const char* const* names,
    const char* const* values, size_t count, tollgate_error* err);
TOLLGATE_API int tollgate_call_body(tollgate_call* call, const void* chunk, size_t len, tollgate_error* err);
/* `broken_off`: the answer was cut short (no success; the estimate stands). */
TOLLGATE_API int tollgate_call_finish(tollgate_call* call, int broken_off, tollgate_error* err);

/* After admission: its fencing token (0 before and after its end), whether it holds a slot, how
 * long it waited. One thread per call. */
TOLLGATE_API uint64_t tollgate_call_fence(const tollgate_call* call);
TOLLGATE_API int tollgate_call_holds_slot(const tollgate_call* call);
TOLLGATE_API int64_t tollgate_call_waited_ms(const tollgate_call* call);
/* The tokens asked for (input + output, as counted). One thread per call. */
TOLLGATE_API int64_t tollgate_call_tokens(const tollgate_call* call);

/* Frees the call (NULL: nothing). An admitted call not yet ended is released first (its slot
 * back, the estimate stands). Not while another thread uses the call (cancel excepted: do not
 * cancel a call after freeing it). */
TOLLGATE_API void tollgate_call_free(tollgate_call* call);

#ifdef __cplusplus
}
#endif

#endif /* TOLLGATE_H */
