// /healthz, /readyz and /metrics over real HTTP on 127.0.0.1.
import { describe, expect, it } from 'vitest';
import { startWorld } from './helpers.js';

async function get(url: string): Promise<{ status: number; type: string; text: string }> {
  const res = await fetch(url);
  return { status: res.status, type: res.headers.get('content-type') ?? '', text: await res.text() };
}

describe('the health server', () => {
  it('answers /healthz always, /readyz by the profiles, /metrics in the Prometheus format', async () => {
    const world = await startWorld({
      profiles: ['docs', 'sales'],
      reconcile: true,
      daemon: { listen: { host: '127.0.0.1', port: 0 } },
    });
    const base = world.daemon.url as string;
    expect(base).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    expect(await get(`${base}/healthz`)).toMatchObject({ status: 200, text: '{"status":"ok"}\n' });
    const before = await get(`${base}/readyz`);
    expect(before.status).toBe(503);
    expect(JSON.parse(before.text)).toEqual({
      ready: false,
      // The token checks' defaults, and so how long a revoked grant may go unnoticed.
      checks: { intervalSeconds: 900, maxPerSecond: 1, noticeWithinSeconds: 900 },
      profiles: {
        docs: { ready: false, reason: 'no access token yet', expiresAt: null },
        sales: { ready: false, reason: 'no access token yet', expiresAt: null },
      },
    });

    await world.daemon.sweep();
    const ready = await get(`${base}/readyz`);
    expect(ready.status).toBe(200);
    const body = JSON.parse(ready.text) as { ready: boolean; profiles: Record<string, { ready: boolean; expiresAt: string }> };
    expect(body.ready).toBe(true);
    expect(body.profiles.docs).toEqual({ ready: true, expiresAt: new Date(world.clock.now() + 20_000).toISOString() });

    world.clock.advance(7_000);
    const metrics = await get(`${base}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.type).toContain('text/plain');
    expect(metrics.text).toContain('syncauth_renewals_total{profile="docs",outcome="renewed"} 1');
    expect(metrics.text).toContain('syncauth_reconciles_total{profile="sales",outcome="created"} 1');
    expect(metrics.text).toContain('syncauth_token_expiry_seconds{profile="docs"} 13');
    expect(metrics.text).toContain(`syncauth_last_success_timestamp_seconds{profile="docs"} ${Math.round((world.clock.now() - 7_000) / 1000)}`);
    expect(metrics.text).toContain('syncauth_profiles{state="ready"} 2');
    expect(metrics.text).toContain('syncauth_profiles{state="reauthorization_needed"} 0');

    // A revoked grant: not ready, with the reason and the command, and no secret in the body.
    const docs = world.grants.get('docs');
    if (!docs) throw new Error('grant missing');
    world.emu.revokeGrant(docs.refreshToken);
    world.clock.advance(10_000);
    await world.daemon.sweep();
    const parked = await get(`${base}/readyz`);
    expect(parked.status).toBe(503);
    const parkedBody = JSON.parse(parked.text) as { profiles: Record<string, { ready: boolean; reason?: string }> };
    expect(parkedBody.profiles.docs).toMatchObject({ ready: false, reason: expect.stringContaining('syncauth setup --profile docs') });
    expect(parkedBody.profiles.sales).toMatchObject({ ready: true });
    expect(parked.text).not.toContain(docs.refreshToken);
    expect(parked.text).not.toContain(docs.appSecret);
    const after = await get(`${base}/metrics`);
    expect(after.text).toContain('syncauth_renewals_total{profile="docs",outcome="reauthorization_needed"} 1');
    expect(after.text).toContain('syncauth_profiles{state="reauthorization_needed"} 1');

    expect((await get(`${base}/nothing`)).status).toBe(404);
    expect((await fetch(`${base}/healthz`, { method: 'POST' })).status).toBe(405);

    await world.daemon.close();
    await expect(fetch(`${base}/healthz`)).rejects.toThrow();
  });
});
