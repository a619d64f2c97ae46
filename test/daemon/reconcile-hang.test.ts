// A profile's renewal never waits for its own reconcile. The service hangs on the first reconcile for longer
// than a token lives (its deadline is longer still); on the real clock and the real schedule the profile keeps
// renewing and publishing meanwhile, its token file never lacks a live token, and once the hung reconcile
// gives up, the one queued behind it gives the connector the newest token.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { startDaemon } from '../../src/daemon/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { captureLog, connectorsNamed, emulator, obtainGrant, profileOf, tempDir, tokensOf } from './helpers.js';

const LIFETIME_S = 6;
const MARGIN_MS = 3_000;
const RECONCILE_DEADLINE_MS = 9_000;
const RUN_MS = 16_000;

describe('a reconcile that hangs', () => {
  it('holds neither the renewals nor the token file; the reconcile after it uses the newest token', async () => {
    const emu = await emulator({ tokenLifetimeSeconds: LIFETIME_S });
    // The first service request of the first reconcile is answered only after a minute.
    emu.setFaults([{ route: 'sources', latencyMs: 60_000, times: 1 }]);
    const grant = await obtainGrant(emu);
    const dir = tempDir();
    const tokenFile = path.join(dir, 'token');
    const log = captureLog('debug');
    const daemon = await startDaemon({
      profiles: [profileOf(emu, { name: 'slow', grant, reconcile: true })],
      profileStore: openProfileStore(path.join(dir, 'config')),
      renewMarginMs: MARGIN_MS,
      jitterMs: 300,
      schedule: '* * * * * *',
      tokenFile,
      reconcileTimeoutMs: RECONCILE_DEADLINE_MS,
      logger: log.logger,
      serviceRetry: { retries: 0 },
      shutdownTimeoutMs: 500,
    });
    let samples = 0;
    const missing: number[] = [];
    let seen = false;
    const started = Date.now();
    try {
      while (Date.now() - started < RUN_MS) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        const issued = existsSync(tokenFile) ? emu.state.accessTokens.get(readFileSync(tokenFile, 'utf8')) : undefined;
        if (issued) seen = true;
        if (!seen) continue;
        samples += 1;
        if (!issued || issued.expiresAt <= Date.now()) missing.push(Date.now() - started);
      }
    } finally {
      await daemon.close();
    }
    const records = log.records();
    const timedOut = records.find((r) => r.event === 'reconcile.failed' && r.errorCode === 'RECONCILE_TIMEOUT');
    const reconciled = records.filter((r) => typeof r.event === 'string' && /^reconcile\.(created|adopted|updated)$/.test(r.event));
    const renewals = tokensOf(emu, grant.refreshToken).slice(1);
    console.log(`hung reconcile: ${renewals.length} renewals in ${RUN_MS / 1000} s of ${LIFETIME_S}-s tokens; ${missing.length}/${samples} samples without a live token; ${reconciled.length} reconciles after the hung one`);

    expect(timedOut, 'the first reconcile hung until its deadline').toBeDefined();
    expect(samples).toBeGreaterThan(50);
    expect(missing).toEqual([]);
    // Renewed through the hang: more tokens issued before its deadline than one.
    const hangStart = renewals[0]?.issuedAt ?? 0;
    expect(renewals.filter((t) => t.issuedAt < hangStart + RECONCILE_DEADLINE_MS).length).toBeGreaterThanOrEqual(2);
    // The reconcile queued behind the hung one gave the connector a token renewed during the hang, not the first.
    expect(reconciled.length).toBeGreaterThanOrEqual(1);
    const connectors = connectorsNamed(emu, 'conn-slow');
    expect(connectors).toHaveLength(1);
    const held = emu.state.accessTokens.get(String(connectors[0]?.config.token));
    expect(held?.issuedAt).toBeGreaterThan(hangStart);
    expect(held?.expiresAt).toBeGreaterThan(Date.now() - LIFETIME_S * 1000);
  }, 60_000);
});
