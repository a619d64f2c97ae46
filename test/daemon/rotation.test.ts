// A refresh token Dropbox rotates is stored before the renewal's access token is used (published,
// reconciled), used for the next renewal, and never dropped when storing it fails.
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startDaemon, type RunningDaemon } from '../../src/daemon/index.js';
import type { RunningEmulator } from '../../src/emulator/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { captureLog, emulator, fakeClock, obtainGrant, profileOf, tempDir } from './helpers.js';

/**
 * A token endpoint in front of the emulator's that rotates: each answer carries a new refresh token, which
 * it maps back to the emulator's grant on the next request. It records the refresh tokens it was sent.
 */
async function rotatingTokenEndpoint(emu: RunningEmulator): Promise<{ url: string; sent: string[]; close: () => Promise<void> }> {
  const original = new Map<string, string>();
  const sent: string[] = [];
  let counter = 0;
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      const form = new URLSearchParams(body);
      const given = form.get('refresh_token') ?? '';
      sent.push(given);
      form.set('refresh_token', original.get(given) ?? given);
      void fetch(emu.tokenUrl, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form.toString() }).then(async (answer) => {
        const json = (await answer.json()) as Record<string, unknown>;
        if (answer.ok) {
          counter += 1;
          const rotated = `rotated-refresh-token-${counter}-${'x'.repeat(40)}`;
          original.set(rotated, form.get('refresh_token') ?? '');
          json.refresh_token = rotated;
        }
        res.writeHead(answer.status, { 'content-type': 'application/json' }).end(JSON.stringify(json));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/oauth2/token`,
    sent,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

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
