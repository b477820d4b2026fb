// Type-checked (not run) by types.test.js with the TypeScript of tests/sdk: the declarations of
// index.d.ts accept what the README shows and refuse what they should.
import * as tollgate from '../..';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';

export async function readme(): Promise<number> {
    await using call = await tollgate.call('anthropic', { caller: 'nightly', model: 'claude-sonnet-4-5',
        inputTokens: 1200, maxTokens: 800, timeoutMs: 30000, signal: AbortSignal.timeout(60000) });
    call.settle({ input_tokens: 1187, output_tokens: 412 });
    const fence: bigint = call.fence;
    void fence;
    return tollgate.status().providers[0].used_tokens;
}

export async function sdks(): Promise<void> {
    const anthropic = new Anthropic({ fetch: tollgate.fetch('anthropic', { caller: 'nightly' }) });
    const openai = new OpenAI({ fetch: tollgate.fetch('openai', { timeoutMs: 60000 }) });
    const answer = await anthropic.messages.create({ model: 'm', max_tokens: 8, messages: [] });
    const call = await tollgate.call('anthropic');
    call.settle(answer.usage);
    const done = await openai.chat.completions.create({ model: 'm', messages: [] });
    const other = await tollgate.call('openai');
    other.settle(done.usage ?? null);
}

export async function wrapped(): Promise<string> {
    const ask = tollgate.wrap(async (q: string) => ({ text: q, usage: { input_tokens: 1, output_tokens: 2 } }),
        { provider: 'anthropic', maxTokens: 100 });
    const r = await ask('hi');
    return r.text;
}

export function errors(e: unknown): number | null {
    if (e instanceof tollgate.Refused || e instanceof tollgate.Timeout) return e.retryAfterMs;
    if (e instanceof tollgate.UsageError) return e.code;
    return null;
}

export async function refused(): Promise<void> {
    // @ts-expect-error a provider is a string
    await tollgate.call(42);
    // @ts-expect-error inputTokens is a number
    await tollgate.call('anthropic', { inputTokens: '5' });
    // @ts-expect-error wrap needs its provider
    tollgate.wrap(async () => 1, {});
}
