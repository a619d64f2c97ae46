// Secrets the daemon learns while it runs (each new access token, a refresh token Dropbox rotated, the grant a
// re-authorization brings) are cut out of every line it logs from then on, as the secrets it read at start are:
// a message that quotes one in a field of no secret name (a provider's echo, an error's text) carries none.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startDaemon, type RunningDaemon } from '../../src/daemon/index.js';
import type { RunningEmulator } from '../../src/emulator/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { captureLog, emulator, fakeClock, obtainGrant, profileOf, tempDir } from './helpers.js';

/** A token endpoint in front of the emulator's that rotates the refresh token at each renewal. */
async function rotatingTokenEndpoint(emu: RunningEmulator): Promise<{ url: string; issued: string[]; close: () => Promise<void> }> {
  const original = new Map<string, string>();
  const issued: string[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      const form = new URLSearchParams(body);
      const given = form.get('refresh_token') ?? '';
      form.set('refresh_token', original.get(given) ?? given);
      void fetch(emu.tokenUrl, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form.toString() }).then(async (answer) => {
        const json = (await answer.json()) as Record<string, unknown>;
        if (answer.ok) {
          const rotated = `learnt-rotated-${issued.length + 1}-${Math.random().toString(36).slice(2)}${'r'.repeat(30)}`;
          original.set(rotated, form.get('refresh_token') ?? '');
          issued.push(rotated);
          json.refresh_token = rotated;
        }
        res.writeHead(answer.status, { 'content-type': 'application/json' }).end(JSON.stringify(json));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/oauth2/token`,
    issued,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const running: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const stop of running.splice(0).reverse()) await stop();
});

describe('secrets learnt while the daemon runs', () => {
  it('a new access token and a rotated refresh token are redacted from a free-text field of a later log line', async () => {
    const clock = fakeClock();
    const emu = await emulator({ now: clock.now, tokenLifetimeSeconds: 20 });
    const endpoint = await rotatingTokenEndpoint(emu);
    running.push(endpoint.close);
    const grant = await obtainGrant(emu);
    const tokenFile = path.join(tempDir(), 'token');
    const log = captureLog('info');
    const daemon: RunningDaemon = await startDaemon({
      profiles: [{ ...profileOf(emu, { name: 'docs', grant }), tokenUrl: endpoint.url, storeRefreshToken: async () => undefined }],
      profileStore: openProfileStore(tempDir()),
      renewMarginMs: 5_000,
      schedule: false,
      now: clock.now,
      tokenFile,
      logger: log.logger,
    });
    running.push(() => daemon.close());
    expect((await daemon.sweep()).profiles[0]?.renewal).toBe('renewed');
    const accessToken = readFileSync(tokenFile, 'utf8').trim();
    const rotated = endpoint.issued.at(-1) as string;
    expect(accessToken.length).toBeGreaterThan(8);
    expect(rotated).toMatch(/^learnt-rotated-1-/);

    log.logger.warn({ event: 'test.echo', upstream: `the provider echoed ${accessToken} and ${rotated}`, body: encodeURIComponent(rotated) }, `seen: ${accessToken}`);
    const line = log.lines.at(-1) as string;
    expect(line).toMatch(/test\.echo/);
    expect(line).not.toContain(accessToken);
    expect(line).not.toContain(rotated);
    expect(line).not.toContain(encodeURIComponent(rotated));
  });

  it('the grant a re-authorization brings is redacted from a later log line, whatever came of storing it', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const log = captureLog('info');
    const daemon: RunningDaemon = await startDaemon({
      profiles: [{ ...profileOf(emu, { name: 'docs', grant }), storeGrant: async () => undefined }],
      profileStore: openProfileStore(tempDir()),
      renewMarginMs: 5_000,
      schedule: false,
      logger: log.logger,
    });
    running.push(() => daemon.close());
    const fresh = { appKey: 'learnt-app-key-9k2', appSecret: 'learnt-app-secret-q7w3e', refreshToken: 'learnt-reauthorized-refresh-token-z8x', accountId: '' };
    await daemon.reauthorized('docs', fresh);

    log.logger.info({ event: 'test.echo', detail: `secret ${fresh.appSecret}, token ${fresh.refreshToken}`, basic: Buffer.from(`${fresh.appKey}:${fresh.appSecret}`).toString('base64') }, 'echo');
    const line = log.lines.at(-1) as string;
    expect(line).toMatch(/test\.echo/);
    expect(line).not.toContain(fresh.appSecret);
    expect(line).not.toContain(fresh.refreshToken);
    expect(line).not.toContain(Buffer.from(`${fresh.appKey}:${fresh.appSecret}`).toString('base64'));
  });
});
