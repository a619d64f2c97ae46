// Secrets the daemon learns while it runs (each new access token, a refresh token Dropbox rotated, the grant a
// re-authorization brings) are cut out of every line it logs from then on, as the secrets it read at start are:
// a message that quotes one in a field of no secret name (a provider's echo, an error's text) carries none.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startDaemon, type RunningDaemon } from '../../src/daemon/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { captureLog, emulator, fakeClock, obtainGrant, profileOf, rotatingTokenEndpoint, tempDir } from './helpers.js';


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
    expect(rotated).toMatch(/^rotated-refresh-token-1-/);

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
