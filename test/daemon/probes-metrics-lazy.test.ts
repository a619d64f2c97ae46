// Probes of /healthz and /readyz never load prom-client, whatever the daemon counts (the budget's series
// included): it is loaded on the first scrape of /metrics. A file of its own, so that no other test in this
// process has loaded it first.
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { startDaemon } from '../../src/daemon/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { captureLog, emulator, obtainGrant, profileOf, tempDir } from './helpers.js';

const promClientLoaded = (): boolean => Object.keys(createRequire(import.meta.url).cache).some((file) => file.includes('/prom-client/'));

describe('the health server', () => {
  it('answers /healthz and /readyz without loading prom-client, and loads it on the first scrape of /metrics', async () => {
    const emu = await emulator({ tokenLifetimeSeconds: 4 * 3600 });
    const grant = await obtainGrant(emu);
    const daemon = await startDaemon({
      profiles: () => Promise.resolve([profileOf(emu, { name: 'probed', grant })]),
      profileStore: openProfileStore(tempDir()),
      renewMarginMs: 15 * 60_000,
      schedule: false,
      checkIntervalMs: 0,
      maxRenewalsPerSecond: 5,
      logger: captureLog('info').logger,
      listen: { host: '127.0.0.1', port: 0 },
    });
    try {
      await daemon.sweep();
      expect(promClientLoaded()).toBe(false);
      for (const path of ['/healthz', '/readyz', '/healthz', '/readyz']) expect((await fetch(`${daemon.url as string}${path}`)).status).toBe(200);
      expect(promClientLoaded()).toBe(false);
      const metrics = await (await fetch(`${daemon.url as string}/metrics`)).text();
      expect(metrics).toContain('syncauth_token_requests_total{outcome="ok"} 1');
      expect(promClientLoaded()).toBe(true);
    } finally {
      await daemon.close();
    }
  });
});
