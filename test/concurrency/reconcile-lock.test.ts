// A profile's reconciles take turns across processes on a lock of their own (`<profile>.reconcile.lock`), so
// twenty `refresh` processes that all find no connector recorded make one connector, not twenty, even where the
// service lets two connectors share a name. The lock is not the renewal lock: `token` never waits for it; and a
// holder killed is found dead by its owner record, its lock taken over at once.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, rmSync, symlinkSync, unlinkSync, utimesSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  onboardWithGrant, readProfileState, runCli, sources, spawnCli, startOnboarding, type Onboarded, type Onboarding,
} from '../helpers/onboarding.js';

const PROCESSES = 20;
// Every request to the sources routes takes this long, so that reconciles not kept apart would overlap between
// listing the family and creating the connector, as they do against a slow service.
const SOURCES_LATENCY_MS = 150;

let ob: Onboarding;

beforeAll(async () => {
  ob = await startOnboarding({ emulator: { uniqueConnectorNames: false } });
});
afterAll(async () => ob.emulator.close());

const run = (p: Onboarded, args: string[], timeoutMs = 60_000) => runCli(args, { env: p.env, cwd: p.home.dir, timeoutMs });

describe('reconciles of one profile across processes', () => {
  it(`${PROCESSES} \`refresh\` at once with the connector id lost, against a service without the unique-name rule: one connector`, async () => {
    const p = await onboardWithGrant(ob, 'twenty-lost');
    // A new connector name drops the recorded connector id: the next refresh makes the connector under it.
    const renamed = await run(p, ['profile', 'set', '--profile', p.profile, '--connector-name', 'twenty-lost-renamed']);
    expect(renamed.code, renamed.stderr).toBe(0);
    expect(readProfileState(p.home, p.profile)).not.toHaveProperty('connectorId');

    ob.emulator.setFaults([{ route: 'sources', latencyMs: SOURCES_LATENCY_MS }]);
    const from = ob.emulator.state.requests.length;
    try {
      const results = await Promise.all(
        Array.from({ length: PROCESSES }, () => run(p, ['refresh', '--profile', p.profile, '--json'], 150_000)),
      );
      for (const result of results) expect(result.code, result.stderr).toBe(0);
      // Never two at any moment: one connector was made in all, not several of which all but one went later.
      const creates = ob.emulator.state.requests.slice(from).filter((r) => r.route === 'sources' && r.method === 'POST' && r.status === 200);
      expect(creates, 'connectors created').toHaveLength(1);
      const family = sources(ob).filter((s) => s.name.startsWith('twenty-lost-renamed'));
      expect(family.map((s) => s.name)).toEqual(['twenty-lost-renamed']);
      const [kept] = family;
      const actions = results.map((r) => (JSON.parse(r.stdout) as { connector: { id: string; action: string } }).connector);
      expect(actions.every((c) => c.id === kept?.id)).toBe(true);
      expect(actions.filter((c) => c.action === 'created')).toHaveLength(1);
      expect(readProfileState(p.home, p.profile)).toMatchObject({ connectorId: kept?.id, connectorName: 'twenty-lost-renamed' });
    } finally {
      ob.emulator.setFaults([]);
    }
  }, 240_000);

  it('the reconcile lock is its own: `token` goes on while it is held, `refresh` waits, and a killed holder is taken over at once', async () => {
    const p = await onboardWithGrant(ob, 'held');
    const lock = path.join(p.home.configDir, 'profiles', `${p.profile}.reconcile.lock`);
    // Another process holds the profile's reconcile lock, recorded as its owner the way syncauth records one.
    const holder: ChildProcess = spawn('sleep', ['600'], { stdio: 'ignore' });
    try {
      mkdirSync(lock, { mode: 0o700 });
      symlinkSync(`${hostname()} ${holder.pid} ${randomUUID()}`, `${lock}.owner`);

      const refresh = spawnCli(['refresh', '--profile', p.profile, '--json'], { env: p.env, cwd: p.home.dir, stdin: '', timeoutMs: 60_000 });
      let refreshed = false;
      void refresh.result.then(() => (refreshed = true));
      // The renewal is not behind the reconcile lock: `token` answers while `refresh` waits for the lock.
      const token = await run(p, ['token', '--profile', p.profile]);
      expect(token.code, token.stderr).toBe(0);
      expect(token.stdout).toMatch(/^sl\.u\.\S+\n$/);
      await new Promise((resolve) => setTimeout(resolve, 1000));
      expect(refreshed, 'refresh did not wait for the reconcile lock').toBe(false);

      // The holder dies; its lock, refreshed just now, would go stale only after 10 s.
      const now = new Date();
      utimesSync(lock, now, now);
      holder.kill('SIGKILL');
      const killedAt = Date.now();
      const result = await refresh.result;
      expect(result.code, result.stderr).toBe(0);
      expect(Date.now() - killedAt, 'the dead holder\'s lock was not taken over at once').toBeLessThan(7_000);
      expect((JSON.parse(result.stdout) as { connector: { id: string } }).connector.id).toBe(p.connectorId);
    } finally {
      holder.kill('SIGKILL');
      rmSync(lock, { recursive: true, force: true });
      try {
        unlinkSync(`${lock}.owner`);
      } catch {
        // Already taken over.
      }
    }
  }, 90_000);
});
