'use strict';
// The package's errors: one class per status code of tollgate.h that a caller tells apart.
// Each carries `code` (tollgate.h's status code), `kind` (its name: "timeout", "refused", ...),
// `errno`, and `retryAfterMs` (when the quota could admit, if a refusal names it, else null).
// A bad value is a UsageError, which is a RangeError; a wrong type is a plain TypeError.

function fill(error, fields) {
    error.code = fields.code ?? 0;
    error.kind = fields.kind ?? '';
    error.errno = fields.errno ?? 0;
    error.retryAfterMs = fields.retryAfterMs ?? null;
}

class TollgateError extends Error {
    constructor(message, fields = {}) {
        super(message);
        fill(this, fields);
    }

    // A UsageError (a RangeError) is a TollgateError too.
    static [Symbol.hasInstance](value) {
        return Function.prototype[Symbol.hasInstance].call(this, value)
            || (this === TollgateError && value instanceof UsageError);
    }

    get name() { return this.constructor.name; }
}

/** No room before the timeout (nothing was taken). */
class Timeout extends TollgateError {}
/** Refused before the timeout: the provider is paused, or the earliest admission lies beyond it. */
class Refused extends TollgateError {}
/** The wait was cancelled (call.cancel(), or the AbortSignal given fired). */
class Cancelled extends TollgateError {}
/** A call used out of turn: admitted twice, settled after it ended, used after it was freed. */
class StateError extends TollgateError {}
/** The home (of this call) was closed. */
class ClosedError extends TollgateError {}
/** The home was opened by another process. */
class ForkedError extends TollgateError {}

/** An invalid value: a negative count, an unknown provider, an empty name. */
class UsageError extends RangeError {
    constructor(message, fields = {}) {
        super(message);
        fill(this, { code: 1, kind: 'usage', ...fields });
    }

    get name() { return 'UsageError'; }
}

const CLASSES = { 1: UsageError, 7: Timeout, 9: Refused, 10: Cancelled, 11: StateError, 12: ClosedError, 13: ForkedError };

// The addon's factory: (code, kind, message, errno, retryAfterMs) -> an error of its class.
function fromStatus(code, kind, message, errno, retryAfterMs) {
    const Cls = CLASSES[code] ?? TollgateError;
    return new Cls(message, { code, kind, errno, retryAfterMs: retryAfterMs >= 0 ? retryAfterMs : null });
}

module.exports = { TollgateError, Timeout, Refused, Cancelled, StateError, ClosedError, ForkedError, UsageError,
    fromStatus };
