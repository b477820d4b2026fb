// TypeScript declarations of the Node client (index.js).

export interface ErrorFields {
    /** tollgate.h's status code (TOLLGATE_E_*). */
    code: number;
    /** Its name: "timeout", "refused", "cancelled", "usage", "state", "closed", "io", ... */
    kind: string;
    errno: number;
    /** When the quota could admit, in ms from the refusal, if it names a time; else null. */
    retryAfterMs: number | null;
}

/** A failure of the shared quota (UsageError, a RangeError, counts as one too). */
export class TollgateError extends Error implements ErrorFields {
    code: number;
    kind: string;
    errno: number;
    retryAfterMs: number | null;
}
/** No room before the timeout (nothing was taken). */
export class Timeout extends TollgateError {}
/** Refused before the timeout: the provider is paused, or the earliest admission lies beyond it. */
export class Refused extends TollgateError {}
/** The wait was cancelled (call.cancel(), or the AbortSignal given fired). */
export class Cancelled extends TollgateError {}
/** A call used out of turn: admitted twice, settled after it ended, used after free(). */
export class StateError extends TollgateError {}
/** The home (of this call) was closed. */
export class ClosedError extends TollgateError {}
/** The home was opened by another process. */
export class ForkedError extends TollgateError {}
/** An invalid value: a negative count, an unknown provider, an empty name. */
export class UsageError extends RangeError implements ErrorFields {
    code: number;
    kind: string;
    errno: number;
    retryAfterMs: number | null;
}

/** A usage: Anthropic's, OpenAI's (Chat Completions or Responses), camelCase, or an answer with one. */
export type Usage =
    | { input_tokens: number; output_tokens: number; cache_creation_input_tokens?: number | null }
    | { prompt_tokens: number; completion_tokens: number }
    | { inputTokens: number; outputTokens: number }
    | { usage: Usage };

export interface CallOptions {
    /** Who, in status and history (default "node"). */
    caller?: string;
    /** The model, for per-model limits. */
    model?: string;
    /** The prompt's tokens (default 0). */
    inputTokens?: number;
    /** The answer's most tokens (default 0). */
    maxTokens?: number;
    /** Hold a parallel slot until the call ends (default true). */
    slot?: boolean;
    /** How long to wait for room, in ms (default 30000; 0: a try). */
    timeoutMs?: number;
    /** Cancels the wait (a Cancelled error whose cause is the signal's reason). */
    signal?: AbortSignal;
    /** A home string (directory or redis://...) or a Home; default $TOLLGATE_HOME, else the default home. */
    home?: string | Home;
}

export interface WrapOptions extends CallOptions {
    provider: string;
}

export interface FetchOptions {
    caller?: string;
    /** How long a request waits for room, in ms (default 30000); then it is answered 429. */
    timeoutMs?: number;
    home?: string | Home;
    /** The fetch that sends (default globalThis.fetch). */
    fetch?: typeof globalThis.fetch;
}

/** One call: admitted, then ended by settle, report429 or release. */
export class Call implements AsyncDisposable, Disposable {
    private constructor();
    readonly home: Home;
    /** The admission's fencing token (0n before). */
    readonly fence: bigint;
    readonly holdsSlot: boolean;
    readonly waitedMs: number;
    /** The tokens asked for (input + output). */
    readonly tokens: number;
    admit(options?: { timeoutMs?: number; signal?: AbortSignal }): Promise<this>;
    cancel(): void;
    /** The call succeeded: its real usage (undefined: the estimate stands). */
    settle(usage?: Usage | null): void;
    /** The provider answered 429: ms until a retry, or the SDK's 429 error (its Retry-After is read). */
    report429(retryAfter?: number | { headers?: unknown } | null): void;
    /** Given up before an answer: the slot back, the estimate stands. */
    release(): void;
    /** Frees the call; one admitted and not ended gives its slot back. */
    free(): void;
    [Symbol.dispose](): void;
    [Symbol.asyncDispose](): Promise<void>;
}

/** An open Tollgate home. */
export class Home {
    constructor(where?: string);
    readonly text: string;
    /** The status as `tollgate status --json` gives it. */
    status(): any;
    close(): void;
    newCall(provider: string, options?: CallOptions): Call;
    newHttpCall(provider: string, body: Uint8Array | ArrayBuffer, options?: { caller?: string }): Call;
    call(provider: string, options?: CallOptions): Promise<Call>;
}

/** A call to `provider`, admitted. */
export function call(provider: string, options?: CallOptions): Promise<Call>;
/** fn wrapped: each call admitted first, settled with its result's usage; a throw releases (a 429 is reported). */
export function wrap<A extends unknown[], R>(fn: (...args: A) => R | Promise<R>, options: WrapOptions): (...args: A) => Promise<R>;
/** A fetch for the official SDKs: every request through the shared quota, as `tollgate proxy` does. */
export function fetch(provider: string, options?: FetchOptions): typeof globalThis.fetch;
/** The home's status, as `tollgate status --json` gives it. */
export function status(home?: string | Home): any;
/** The Home of this process for `home`, kept and shared. */
export function openHome(home?: string | Home): Home;
/** libtollgate's version. */
export function libraryVersion(): string;
