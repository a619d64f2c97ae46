// A refresh token Dropbox rotates is stored before the renewal's access token is used (published,
// reconciled), used for the next renewal, and never dropped when storing it fails.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startDaemon, type RunningDaemon } from '../../src/daemon/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { captureLog, emulator, fakeClock, obtainGrant, profileOf, rotatingTokenEndpoint, tempDir } from './helpers.js';


const running: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const stop of running.splice(0).reverse()) await stop();
});

describe('a rotated refresh token', () => {
  it('is stored before the new access token is published, and used for the next renewal', async () => {
    const clock = fakeClock();
    const emu = await emulator({ now: clock.now, tokenLifetimeSeconds: 20 });
    const endpoint = await rotatingTokenEndpoint(emu);
    running.push(endpoint.close);
    const grant = await obtainGrant(emu);
    const tokenFile = path.join(tempDir(), 'token');
    const stored: { token: string; fileAtThatMoment: string | undefined }[] = [];
    let failNextStore = false;
    const daemon: RunningDaemon = await startDaemon({
      profiles: [
        {
          ...profileOf(emu, { name: 'docs', grant }),
          tokenUrl: endpoint.url,
          storeRefreshToken: async (token) => {
            if (failNextStore) {
              failNextStore = false;
              throw new Error('keychain went away');
            }
            stored.push({ token, fileAtThatMoment: existsSync(tokenFile) ? readFileSync(tokenFile, 'utf8') : undefined });
          },
        },
      ],
      profileStore: openProfileStore(tempDir()),
      renewMarginMs: 5_000,
      schedule: false,
      tokenFile,
      now: clock.now,
      backoff: { baseMs: 500 },
      logger: captureLog().logger,
    });
    running.push(() => daemon.close());

    await daemon.sweep();
    expect(stored).toHaveLength(1);
    // The file was still empty when the new refresh token was stored; the access token came after.
    expect(stored[0]?.fileAtThatMoment).toBeUndefined();
    const firstAccess = readFileSync(tokenFile, 'utf8');
    expect(emu.state.accessTokens.has(firstAccess)).toBe(true);

    clock.advance(15_000);
    await daemon.sweep();
    expect(endpoint.sent).toEqual([grant.refreshToken, stored[0]?.token]);
    expect(stored).toHaveLength(2);
    expect(stored[1]?.fileAtThatMoment).toBe(firstAccess);
    const secondAccess = readFileSync(tokenFile, 'utf8');

    // Storing fails: the renewal's access token is not published, and the next attempt uses the rotated
    // token it kept in memory (the old one may no longer work), storing it again.
    failNextStore = true;
    clock.advance(15_000);
    const failed = await daemon.sweep();
    expect(failed.profiles[0]).toMatchObject({ renewal: 'failed' });
    expect(readFileSync(tokenFile, 'utf8')).toBe(secondAccess);
    const kept = endpoint.sent.length;
    clock.advance(1_000);
    const retried = await daemon.sweep();
    expect(retried.profiles[0]).toMatchObject({ renewal: 'renewed' });
    expect(endpoint.sent[kept]).toMatch(/^rotated-refresh-token-3-/);
    expect(stored.at(-1)?.token).toMatch(/^rotated-refresh-token-4-/);
  });
});
