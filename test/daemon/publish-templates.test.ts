// Templates are rendered beside the token file's chain of writes, not in it: a render that hangs (a source on a
// mount that does not answer, an account id lookup that takes its time) delays neither the token file, nor the
// next write, nor the removal of an expired token. Readiness (`published`) waits for the render to end.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { TokenPublisher } from '../../src/publish/publisher.js';
import type { TemplateRenderer, TemplateValues } from '../../src/publish/template.js';
import { tempDir } from '../helpers/cli.js';
import { captureLog } from './helpers.js';

function holder(value: string) {
  return {
    name: 'docs',
    token: { value, expiresAt: Date.now() + 3_600_000 } as { value: string; expiresAt: number } | undefined,
    removed: false,
    holdsToken: () => true,
    fileChain: Promise.resolve(),
    published: undefined as { value: string; expiresAt: number } | undefined,
    fileFailed: false,
  };
}

/** The template a fake renderer says it renders. */
const SPEC = { source: '/etc/syncauth/t.tmpl', dest: '/run/syncauth/t', mode: 0o600 };

/** A renderer whose renders end only when told to. */
function stuckRenderer() {
  const calls: TemplateValues[] = [];
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => (release = resolve));
  const renderer = { specs: [SPEC], render: (values: TemplateValues) => (calls.push(values), released) } as unknown as TemplateRenderer;
  return { renderer, calls, release };
}

const within = <T>(promise: Promise<T>, ms: number): Promise<T | 'late'> =>
  Promise.race([promise, new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), ms))]);

describe('TokenPublisher with templates', () => {
  it('writes the token file and goes on while a render hangs; ready once the render ends', async () => {
    const file = path.join(tempDir(), 'token');
    const { renderer, calls, release } = stuckRenderer();
    const publisher = new TokenPublisher({ template: file, templates: renderer, now: Date.now, log: captureLog().logger });
    const rt = holder('first-token');
    expect(await within(publisher.publish(rt), 2_000)).toBeUndefined();
    expect(readFileSync(file, 'utf8')).toBe('first-token');
    expect(calls.map((c) => c.accessToken)).toEqual(['first-token']);
    expect(rt.published).toBeUndefined();

    // The next renewal's write does not wait for the render either.
    rt.token = { value: 'second-token', expiresAt: Date.now() + 3_600_000 };
    expect(await within(publisher.publish(rt), 2_000)).toBeUndefined();
    expect(readFileSync(file, 'utf8')).toBe('second-token');

    // Nor does the removal at expiry.
    rt.token = undefined;
    expect(await within(publisher.unpublish(rt), 2_000)).toBeUndefined();
    expect(existsSync(file)).toBe(false);

    // A render that ends for a token no longer held does not say it is published.
    release();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(rt.published).toBeUndefined();
  });

  it('does not wait for the account id either, and says the token is published once its render ended', async () => {
    const file = path.join(tempDir(), 'token');
    let answer: (id: string) => void = () => undefined;
    const accountId = () => new Promise<string>((resolve) => (answer = resolve));
    const rendered: TemplateValues[] = [];
    const renderer = { specs: [SPEC], render: async (values: TemplateValues) => void rendered.push(values) } as unknown as TemplateRenderer;
    const publisher = new TokenPublisher({ template: file, templates: renderer, accountId, now: Date.now, log: captureLog().logger });
    const rt = holder('the-token');
    expect(await within(publisher.publish(rt), 2_000)).toBeUndefined();
    expect(readFileSync(file, 'utf8')).toBe('the-token');
    expect(rt.published).toBeUndefined();
    answer('dbid:AAH4f99');
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(rendered.map((v) => v.accountId)).toEqual(['dbid:AAH4f99']);
    expect(rt.published?.value).toBe('the-token');
  });
});
