// One bad profile never hurts another. Three profiles sit behind a service that never answers, a service that
// trickles one byte at a time, and a token endpoint that trickles; a fourth is healthy. On the real clock and
// the real schedule (a sweep every second, 4-second tokens), the healthy one is renewed on time through many
// lifetimes, its published token is never expired, and the sweeps skip (and count) the stuck ones.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { startDaemon } from '../../src/daemon/index.js';
import type { DaemonProfile } from '../../src/daemon/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { hang, misbehavingServer as misbehaving, trickle } from '../helpers/servers.js';
import { captureLog, emulator, latestTokenOf, obtainGrant, profileOf, renewalsOf, tempDir, tokensOf } from './helpers.js';

const LIFETIME_S = 4;
const MARGIN_MS = 2_000;
const RUN_MS = 24_000;

describe('isolation between profiles', () => {
  it('renews a healthy profile on time while others hang or trickle', async () => {
    const emu = await emulator({ tokenLifetimeSeconds: LIFETIME_S });
    const hungService = await misbehaving(hang);
    const tricklingService = await misbehaving(trickle(200));
    const tricklingTokens = await misbehaving(trickle(200));
    const dir = tempDir();
    const tokenFile = path.join(dir, '{profile}.token');
    const names = ['healthy', 'hung', 'trickling', 'stuck-token'];
    const grants = new Map(await Promise.all(names.map(async (name) => [name, await obtainGrant(emu)] as const)));
    const profile = (name: string): DaemonProfile => profileOf(emu, { name, grant: grants.get(name)!, reconcile: name !== 'stuck-token' });
    const profiles: DaemonProfile[] = [
      profile('healthy'),
      { ...profile('hung'), reconcile: { ...profile('hung').reconcile!, baseUrl: hungService.url } },
      { ...profile('trickling'), reconcile: { ...profile('trickling').reconcile!, baseUrl: tricklingService.url } },
      { ...profile('stuck-token'), tokenUrl: `${tricklingTokens.url}/oauth2/token` },
    ];
    const log = captureLog('info');
    const daemon = await startDaemon({
      profiles,
      profileStore: openProfileStore(path.join(dir, 'config')),
      renewMarginMs: MARGIN_MS,
      jitterMs: 200,
      schedule: '* * * * * *',
      tokenFile,
      logger: log.logger,
      serviceRetry: { retries: 0 },
      shutdownTimeoutMs: 500,
    });
    let samples = 0;
    let expiredOrMissing = 0;
    let firstRenewalSeen = false;
    const healthyFile = tokenFile.replace('{profile}', 'healthy');
    const started = Date.now();
    try {
      while (Date.now() - started < RUN_MS) {
        await new Promise((resolve) => setTimeout(resolve, 250));
        const live = existsSync(healthyFile) ? emu.state.accessTokens.get(readFileSync(healthyFile, 'utf8')) : undefined;
        if (live) firstRenewalSeen = true;
        if (!firstRenewalSeen) continue;
        samples += 1;
        if (!live || live.expiresAt <= Date.now()) expiredOrMissing += 1;
      }
    } finally {
      await daemon.close();
    }
    const healthyRenewals = renewalsOf(emu, grants.get('healthy')!.refreshToken);
    const metrics = await daemon.registry.getSingleMetricAsString('syncauth_sweep_skipped_total');
    const skipped = (name: string): number => Number(new RegExp(`profile="${name}"} (\\d+)`).exec(metrics)?.[1] ?? 0);
    // How long before the previous token's expiry each renewal got its token: the margin, less at most a sweep.
    const issued = tokensOf(emu, grants.get('healthy')!.refreshToken).slice(1);
    const leads = issued.slice(1).map((token, i) => (issued[i] as { expiresAt: number }).expiresAt - token.issuedAt);
    console.log(
      `isolation: healthy renewed ${healthyRenewals}× in ${RUN_MS / 1000} s of ${LIFETIME_S}-s tokens, each ${Math.min(...leads)}–${Math.max(...leads)} ms before the previous one expired ` +
        `(margin ${MARGIN_MS} ms, a sweep every second); ${expiredOrMissing}/${samples} samples without a live token; ` +
        `sweeps skipped hung ×${skipped('hung')}, trickling ×${skipped('trickling')}, stuck-token ×${skipped('stuck-token')}; ` +
        `requests: hung service ${hungService.requests()}, trickling service ${tricklingService.requests()}, trickling token endpoint ${tricklingTokens.requests()}`,
    );
    expect(firstRenewalSeen).toBe(true);
    expect(samples).toBeGreaterThan(50);
    expect(expiredOrMissing).toBe(0);
    expect(Math.min(...leads)).toBeGreaterThan(0);
    // Ideal: one at start, then one every lifetime less the margin (about 2 s): about 12 in 24 s.
    expect(healthyRenewals).toBeGreaterThanOrEqual(9);
    // The healthy connector holds the latest token (allowing the reconcile of the very last renewal to lag).
    const connector = [...(emu.state.workspaces.get('default')?.sources.values() ?? [])].find((s) => s.name === 'conn-healthy');
    const tokens = [...emu.state.accessTokens.values()].filter((t) => t.token === connector?.config.token);
    expect(tokens.length).toBe(1);
    expect(latestTokenOf(emu, grants.get('healthy')!.refreshToken)!.expiresAt - tokens[0]!.expiresAt).toBeLessThanOrEqual(LIFETIME_S * 1000);
    // The stuck profiles were visited, found busy, and skipped, not waited for.
    expect(skipped('hung')).toBeGreaterThan(5);
    expect(skipped('trickling')).toBeGreaterThan(5);
    expect(skipped('stuck-token')).toBeGreaterThan(5);
  }, 60_000);
});
