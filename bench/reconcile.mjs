// The stored path with its connectors, for `npm run bench` (alone: BENCH_ONLY=reconcile): `syncauth daemon
// --once` over N profiles made as operators make them, each with its own `dropbox` connector, all in one
// workspace of the emulator, as `setup` leaves them: the file store holding the grant and the service's API key,
// the state recording the connector's id and name. Tokens live 120 s, less than the renew margin, so every run
// renews every profile and reconciles its connector.
//
// Per N (default 100, 500, 2,000 and 10,000; BENCH_RECONCILE_SIZES), a workspace of its own holding exactly the
// N connectors; one `--once` run. The rows give the run's CPU per profile, the marginal CPU per profile added
// since the N before (which start-up does not blur), the peak RSS (both the child's own, bench/usage.mjs), the
// wall, and the service's calls and answer bytes per profile, counted by the emulator. The connectors are made
// by POST, one each, not through the package's reconcile, so another build's (SYNCAUTH_BENCH_ROOT) is measured
// on the same workspace. Not a test: nothing here fails on a number.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { child, emulatorChild, makeGrants } from './daemon.mjs';
import { once, renewedSince, stateLike } from './stored.mjs';
import { serveRole } from './roles.mjs';

const self = fileURLToPath(import.meta.url);
const own = path.resolve(path.dirname(self), '..');
const root = process.env.SYNCAUTH_BENCH_ROOT ? path.resolve(process.env.SYNCAUTH_BENCH_ROOT) : own;
const dist = (file) => import(pathToFileURL(path.join(root, 'dist', file)).href);

const SIZES = (process.env.BENCH_RECONCILE_SIZES ?? '100,500,2000,10000').split(',').filter(Boolean).map(Number);
const LIFETIME_S = 120;
const STORE_KEY = 'bench-store-key-of-enough-length';
const WRITERS = 16;
const MiB = 1024 * 1024;

const roles = {
  /**
   * Writes `names` into `dir` through the package's stores, as `setup` does, and makes each one's connector in
   * the workspace of `apiKey`.
   */
  async generate({ dir, names, refreshTokens, app, urls, apiKey }) {
    const { openFileSecretStore } = await dist('credentials/index.js');
    const { openProfileStore } = await dist('profile/index.js');
    const { ServiceClient } = await dist('service/index.js');
    const { dropboxConfig } = await dist('sync/reconcile.js');
    const secrets = openFileSecretStore({ configDir: dir, storeKey: () => STORE_KEY });
    const state = openProfileStore(dir);
    const client = new ServiceClient({ baseUrl: urls.url, apiKey });
    let next = 0;
    try {
      await Promise.all(Array.from({ length: WRITERS }, async () => {
        while (next < names.length) {
          const i = next++;
          const name = names[i];
          const connectorName = `dropbox-data-${name}`;
          const spec = { name: connectorName, remoteUrl: 'dropbox://data', recursive: false, appKey: app.appKey, appSecret: app.appSecret, refreshToken: refreshTokens[i] };
          const connector = await client.createSource({ name: connectorName, type: 'dropbox', config: dropboxConfig(spec) });
          await secrets.set(name, { app_key: app.appKey, app_secret: app.appSecret, refresh_token: refreshTokens[i], api_key: apiKey });
          await state.update(name, () => ({
            ...stateLike(name, urls, LIFETIME_S),
            connectorId: connector.id,
            connectorName,
            accountId: `dbid:AAH${String(i).padStart(10, '0')}`,
            secretsVersion: randomUUID(),
          }));
        }
      }));
    } finally {
      await client.close();
    }
    return { written: names.length };
  },
};

/** Rows of [measurement, value, unit, target]. */
export async function reconcileRows() {
  const { DEFAULT_APP } = await dist('emulator/index.js');
  const app = DEFAULT_APP;
  const workspaces = SIZES.map((n) => ({ name: `reconcile-${n}`, apiKeys: [`bench-reconcile-api-key-${n}`] }));
  const emulator = await emulatorChild(workspaces, { tokenLifetimeSeconds: LIFETIME_S });
  const work = mkdtempSync(path.join(tmpdir(), 'syncauth-bench-reconcile-'));
  const rows = [];
  const runs = [];
  try {
    const refreshTokens = await makeGrants(emulator, app, Math.max(...SIZES));
    const urls = { url: emulator.url, authorizeUrl: emulator.authorizeUrl, tokenUrl: emulator.tokenUrl, apiUrl: emulator.apiUrl };
    for (const n of SIZES) {
      const label = `N = ${n.toLocaleString('en-US')} profiles, each with its connector, one workspace of N connectors, tokens of ${LIFETIME_S} s`;
      const dir = path.join(work, `n${n}`, 'config');
      const names = Array.from({ length: n }, (_, i) => `p${String(i).padStart(5, '0')}`);
      try {
        const apiKey = `bench-reconcile-api-key-${n}`;
        await child('generate', { dir, names, refreshTokens: refreshTokens.slice(0, n), app, urls, apiKey }, { file: self, timeoutMs: 1_800_000 });
        const since = Date.now();
        const before = await emulator.serviceCalls(0);
        const load = loadavg();
        const due = await once(dir);
        const calls = await emulator.serviceCalls(before.next);
        const renewed = await renewedSince(dir, since);
        const updated = calls.calls['PUT /api/v1/sources/{id}'] ?? 0;
        const last = due.stderr.trim().split('\n').at(-1) ?? '';
        // With 120-s tokens, a pass longer than that ends with the first tokens it renewed expired: not fresh.
        const stale = /(\d+) of \d+ profiles are not fresh/.exec(last)?.[1];
        const why = stale ? `${stale} not fresh at its end (${LIFETIME_S}-s tokens renewed early in the pass had expired)` : last.length > 140 ? `${last.slice(0, 140)}…` : last;
        const note = renewed === n && updated === n && due.code === 0
          ? ''
          : ` [exit ${due.code}, ${renewed} of ${n} renewed, ${updated} connectors updated${due.code === 0 ? '' : `; ${why}`}]`;
        const previous = runs.at(-1);
        runs.push({ n, cpuMs: due.cpuMs });
        rows.push([`${label}${note}`, due.ms, 'ms wall', `load average ${load.map((l) => l.toFixed(2)).join(' ')} at start`]);
        rows.push(['  daemon --once CPU (start-up, loading, renewals, reconciles)', due.cpuMs, 'ms', '']);
        rows.push(['  CPU per profile', due.cpuMs / n, 'ms', '']);
        if (previous) {
          const marginal = (due.cpuMs - previous.cpuMs) / (n - previous.n);
          runs.at(-1).marginal = marginal;
          rows.push([`  marginal CPU per added profile (${previous.n.toLocaleString('en-US')} → ${n.toLocaleString('en-US')})`, marginal, 'ms', '']);
        }
        rows.push(['  peak RSS', due.maxRss / MiB, 'MiB', n >= 10_000 ? '≤ 300 MiB' : '']);
        rows.push(['  service calls per profile', calls.count / n, 'calls', '']);
        for (const [call, count] of Object.entries(calls.calls).sort()) rows.push([`    ${call}`, count / n, 'calls', '']);
        rows.push(['  service answer bytes per profile', calls.bytes / n, 'bytes', '']);
      } catch (error) {
        rows.push([`${label}: FAILED (${error.message.split('\n')[0]})`, NaN, '', '']);
      } finally {
        rmSync(path.dirname(dir), { recursive: true, force: true });
      }
    }
    // The first step's marginal figure against each later one: flat when each profile costs the same.
    const first = runs.find((r) => r.marginal !== undefined);
    for (const r of runs.filter((r) => r.marginal !== undefined && r !== first)) {
      rows.push([`marginal CPU per added profile up to ${r.n.toLocaleString('en-US')}, against that up to ${first.n.toLocaleString('en-US')}`, r.marginal / first.marginal, 'x', '≤ 1.5x']);
    }
  } finally {
    await emulator.close();
    rmSync(work, { recursive: true, force: true });
  }
  return rows;
}

export function printReconcile(rows) {
  const figure = (v) => (Number.isNaN(v) ? '—' : Math.abs(v) >= 1000 ? Math.round(v).toLocaleString('en-US') : v.toFixed(Math.abs(v) >= 10 ? 1 : 3));
  const header = ['stored path with connectors (one workspace)', 'value', 'unit', 'target / note'];
  const table = [header, ...rows.map(([name, value, unit, target]) => [name, figure(value), unit, target])];
  const widths = header.map((_, i) => Math.max(...table.map((r) => r[i].length)));
  console.log(`\nsyncauth reconcile bench — \`daemon --once\` as a real process over profiles each with its own connector in one workspace, emulator in a child of its own${root === own ? '' : ` (build measured: ${root})`}`);
  for (const row of table) console.log(row.map((c, i) => (i === 0 || i === 2 || i === 3 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ').trimEnd());
}

if (process.argv[1] === self && process.argv[2] in roles) {
  serveRole(roles, process.argv[2]);
} else if (process.argv[1] === self) {
  // `node bench/reconcile.mjs`: this table alone.
  printReconcile(await reconcileRows());
}
