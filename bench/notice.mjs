// The time from a revoked grant to the notice that a person is needed, with Dropbox's 4-hour tokens, on a
// virtual clock as the soak runs it (soak/virtual.mjs): the real daemon code and the emulator in this process,
// one clock moved a second at a time, a sweep every minute as the default schedule, the token checks looked for
// every second as the daemon does, with their defaults (every 15 minutes, at most one a second). Grants are
// revoked one after another at random moments, each noticed (the profile parked, `profile.reauthorization_needed`
// told) and then authorized again before the next. Also: the Dropbox calls the checks cost per profile and day.
// Not a test: nothing fails on a number.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { makeGrants, quietLogger } from './daemon.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = (file) => import(pathToFileURL(path.join(root, 'dist', file)).href);

const START = Date.parse('2030-01-01T00:00:00Z');
const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const DAY = 24 * 60 * MINUTE;
const LIFETIME_S = 14_400;
const MARGIN_MS = 15 * MINUTE;

/** Deterministic numbers in [0, 1), so a run can be repeated. */
function seeded(seed) {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

/**
 * One run with `count` profiles: `revocations` grants revoked one at a time, each at a random moment up to 15
 * minutes after the previous was set right. Returns the times to notice (ms), the checks made and the virtual
 * time that passed.
 */
async function runOne(count, revocations, seed) {
  const [{ startEmulator, DEFAULT_APP }, { startDaemon }, { openProfileStore }] = await Promise.all([dist('emulator/index.js'), dist('daemon/index.js'), dist('profile/index.js')]);
  let t = START;
  const now = () => t;
  const random = seeded(seed);
  const emu = await startEmulator({ autoApprove: true, now, tokenLifetimeSeconds: LIFETIME_S });
  const work = mkdtempSync(path.join(tmpdir(), 'syncauth-bench-notice-'));
  try {
    const names = Array.from({ length: count }, (_, i) => `p${String(i).padStart(4, '0')}`);
    const tokens = await makeGrants(emu, DEFAULT_APP, count);
    const grants = new Map(names.map((name, i) => [name, { appKey: DEFAULT_APP.appKey, appSecret: DEFAULT_APP.appSecret, refreshToken: tokens[i] }]));
    const noticed = new Map();
    const daemon = await startDaemon({
      profiles: async () => names.map((name) => ({ name, tokenUrl: emu.tokenUrl, dropboxApiUrl: emu.apiUrl, grant: grants.get(name), readGrant: async () => grants.get(name) })),
      profileStore: openProfileStore(path.join(work, 'config')),
      renewMarginMs: MARGIN_MS,
      schedule: false,
      checkTickMs: false,
      concurrency: 16,
      logger: await quietLogger(),
      now,
      random: seeded(seed * 7 + 1),
      tokenFile: path.join(work, '{profile}.token'),
      notices: { notice: (n) => n.type === 'profile.reauthorization_needed' && !noticed.has(n.profile) && noticed.set(n.profile, t) },
    });
    const checksBefore = () => emu.state.requests.filter((r) => r.path === '/2/users/get_current_account').length;
    let lastSweep = t;
    await daemon.sweep();
    /** One virtual second: the checks due, and a sweep at each minute. */
    const second = async () => {
      t += SECOND;
      if (t - lastSweep >= MINUTE) {
        lastSweep = t;
        await daemon.sweep();
      }
      await daemon.checkTick();
    };
    // The first interval: every profile learns its slot; measured from here.
    for (let s = 0; s < 15 * 60; s += 1) await second();
    const from = t;
    const checks0 = checksBefore();
    const times = [];
    for (let r = 0; r < revocations; r += 1) {
      const wait = Math.floor(random() * 15 * 60);
      for (let s = 0; s < wait; s += 1) await second();
      const name = names[Math.floor(random() * count)];
      emu.revokeGrant(grants.get(name).refreshToken);
      const revokedAt = t;
      noticed.delete(name);
      while (!noticed.has(name)) {
        await second();
        if (t - revokedAt > 4 * 60 * MINUTE) throw new Error(`profile ${name}: no notice within 4 hours of its revocation`);
      }
      times.push(noticed.get(name) - revokedAt);
      // The person authorizes again: a new grant, the profile served again at the next sweep.
      const [fresh] = await makeGrants(emu, DEFAULT_APP, 1);
      grants.set(name, { ...grants.get(name), refreshToken: fresh });
      await daemon.reload();
    }
    const elapsed = t - from;
    const checks = checksBefore() - checks0;
    await daemon.close();
    return { times, checksPerProfileDay: (checks / count) * (DAY / elapsed), elapsed };
  } finally {
    await emu.close();
    rmSync(work, { recursive: true, force: true });
  }
}

function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

/** Rows: [profiles, revocations, median s, max s, bound s, checks per profile per day, real s]. */
export async function noticeRows({ sizes = [1, 100, 1_000], revocations = 20, log = () => {} } = {}) {
  const rows = [];
  for (const count of sizes) {
    const started = performance.now();
    const { times, checksPerProfileDay } = await runOne(count, revocations, 1_000 + count);
    const bound = Math.max(15 * 60, count / 1);
    const row = { count, revocations: times.length, median: quantile(times, 0.5) / 1000, max: Math.max(...times) / 1000, bound, checksPerProfileDay, realSeconds: (performance.now() - started) / 1000 };
    log(row);
    rows.push(row);
  }
  return rows;
}

export function printNotice(rows) {
  const header = ['profiles', 'revocations', 'median s', 'max s', 'bound s', 'checks/profile/day', 'run s'];
  const table = [header, ...rows.map((r) => [String(r.count), String(r.revocations), r.median.toFixed(0), r.max.toFixed(0), r.bound.toFixed(0), r.checksPerProfileDay.toFixed(1), r.realSeconds.toFixed(0)])];
  const widths = header.map((_, i) => Math.max(...table.map((row) => row[i].length)));
  console.log('\nsyncauth notice bench — revocation to notice, 4-hour tokens, virtual clock, checks every 15 min at most 1/s (the defaults)');
  for (const row of table) console.log(row.map((c, i) => c.padStart(widths[i])).join('  '));
}
