// Readiness while a renewal publishes: the files consumers read hold the token before the new one until every
// sink has the new one (a template render can take seconds). That token is still good, so a probe arriving in
// between finds the profile ready, not a 503 at every renewal; once what the files hold has expired (by either
// clock), or the files hold nothing, the profile is not ready until the new token is in place.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ProfileRuntime } from '../../src/daemon/runtime.js';
import { healthOf } from '../../src/daemon/status.js';
import { TokenPublisher } from '../../src/publish/publisher.js';
import type { TemplateRenderer } from '../../src/publish/template.js';
import { tempDir } from '../helpers/cli.js';
import { captureLog } from './helpers.js';

const HOUR = 3_600_000;
const RULE = { needsOwnToken: true, publishes: true };
const SPEC = { source: '/etc/syncauth/t.tmpl', dest: '/run/syncauth/t', mode: 0o600 };

/** A renderer whose renders each end only when told to, in order. */
function heldRenderer() {
  const waiting: (() => void)[] = [];
  const renderer = { specs: [SPEC], render: () => new Promise<void>((resolve) => waiting.push(resolve)) } as unknown as TemplateRenderer;
  const releaseNext = async (): Promise<void> => {
    await expect.poll(() => waiting.length, { timeout: 2_000, interval: 5 }).toBeGreaterThan(0);
    waiting.shift()?.();
  };
  return { renderer, releaseNext };
}

function setup() {
  let wall = Date.parse('2026-11-29T00:00:00Z');
  let mono = 1_000_000;
  const clock = { wall: () => wall, mono: () => mono };
  const file = path.join(tempDir(), 'token');
  const { renderer, releaseNext } = heldRenderer();
  const publisher = new TokenPublisher({ template: file, templates: renderer, now: clock.wall, log: captureLog().logger });
  const rt = new ProfileRuntime('docs', clock);
  const hold = (value: string): void => {
    rt.token = { value, expiresAt: wall + 4 * HOUR, monoExpiresAt: mono + 4 * HOUR };
    rt.learnExpiry(rt.token.expiresAt, 0, rt.token.monoExpiresAt);
  };
  const health = () => healthOf(rt, clock.wall(), RULE);
  const move = (ms: { wall?: number; mono?: number }): void => {
    wall += ms.wall ?? 0;
    mono += ms.mono ?? 0;
  };
  return { rt, file, publisher, releaseNext, hold, health, move };
}

describe('readiness while a renewal publishes', () => {
  it('stays ready while the files still hold the previous, unexpired token, and is ready on the new one once every sink has it', async () => {
    const { rt, file, publisher, releaseNext, hold, health, move } = setup();
    hold('first-token');
    expect(health()).toMatchObject({ ready: false, reason: 'publishing the access token' });
    await publisher.publish(rt);
    await releaseNext();
    await expect.poll(() => rt.published?.value, { timeout: 2_000, interval: 5 }).toBe('first-token');
    expect(health()).toMatchObject({ ready: true });

    // The renewal, three and a half hours on: the token file has the new token, the template's render is slow.
    move({ wall: 3.5 * HOUR, mono: 3.5 * HOUR });
    hold('second-token');
    await publisher.publish(rt);
    expect(readFileSync(file, 'utf8')).toBe('second-token');
    expect(rt.published?.value).toBe('first-token');
    expect(health()).toMatchObject({ ready: true });

    await releaseNext();
    await expect.poll(() => rt.published?.value, { timeout: 2_000, interval: 5 }).toBe('second-token');
    expect(health()).toMatchObject({ ready: true });
  });

  it('is not ready once the token the files still hold has expired, by the wall clock or by the monotonic one', async () => {
    // Past the first token's four hours by both clocks; then by the monotonic clock alone, the wall clock standing
    // still (stepped back, or a host that slept): either way what the files hold is expired.
    for (const late of [{ wall: 0.2 * HOUR, mono: 0.2 * HOUR }, { wall: 0, mono: 0.2 * HOUR }]) {
      const { rt, publisher, releaseNext, hold, health, move } = setup();
      hold('first-token');
      await publisher.publish(rt);
      await releaseNext();
      await expect.poll(() => rt.published?.value, { timeout: 2_000, interval: 5 }).toBe('first-token');
      move({ wall: 3.9 * HOUR, mono: 3.9 * HOUR });
      hold('second-token');
      await publisher.publish(rt);
      expect(health()).toMatchObject({ ready: true });
      move(late);
      expect(health()).toMatchObject({ ready: false, reason: 'publishing the access token' });
      await releaseNext();
      await expect.poll(() => rt.published?.value, { timeout: 2_000, interval: 5 }).toBe('second-token');
      expect(health()).toMatchObject({ ready: true });
    }
  });

  it('is not ready once the files hold nothing', async () => {
    const { rt, publisher, releaseNext, hold, health } = setup();
    hold('first-token');
    await publisher.publish(rt);
    await releaseNext();
    await expect.poll(() => rt.published?.value, { timeout: 2_000, interval: 5 }).toBe('first-token');
    await publisher.unpublish(rt);
    expect(rt.published).toBeUndefined();
    expect(health()).toMatchObject({ ready: false, reason: 'publishing the access token' });
  });
});
