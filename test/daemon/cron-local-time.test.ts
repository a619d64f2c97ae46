// The CLI's bundle hands node-cron a DateTimeFormat of its own for the process's time zone
// (src/daemon/cron-local-time.ts, scripts/bundle-cli.mjs), so that the daemon does not load ICU's locale data.
// It must read every instant as the real one does, in any zone and across daylight-saving changes; and the
// bundled daemon must keep its schedule without building a single real formatter.
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';
import { emulator, obtainGrant, tempDir } from './helpers.js';
import { containerEnv, spawnDaemon } from './process.js';
import { waitFor } from '../helpers/wait.js';

const MODULE = pathToFileURL(path.join(ROOT, 'dist/daemon/cron-local-time.js')).href;

/**
 * In a node of its own with TZ=zone: what node-cron reads (its buildDateParts and getTimezoneGMT, in short)
 * from the real Intl and from cronIntl, for every quarter hour of the days around 2026's clock changes and a
 * few others. Gives the instants where they differ.
 */
function differencesIn(zone: string): string[] {
  const script = `
const { cronIntl } = await import(${JSON.stringify(MODULE)});
const DATE = { year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', weekday: 'short', hour12: false };
const read = (I, date) => {
  const parts = Object.fromEntries(new I.DateTimeFormat('en-US', DATE).formatToParts(date).filter((p) => p.type !== 'literal').map((p) => [p.type, p.value]));
  const name = new I.DateTimeFormat('en-US', { timeZone: undefined, timeZoneName: 'shortOffset' }).formatToParts(date).find((p) => p.type === 'timeZoneName').value;
  const m = /^GMT(?:([+-])(\\d{1,2})(?::(\\d{2}))?)?$/.exec(name);
  const offset = m && m[1] ? (m[1] === '+' ? 1 : -1) * (Number(m[2]) * 60 + Number(m[3] ?? 0)) : m ? 0 : name;
  return JSON.stringify([Number(parts.year), Number(parts.month), Number(parts.day), Number(parts.hour) % 24, Number(parts.minute), Number(parts.second), parts.weekday, offset]);
};
const days = ['2026-01-01', '2026-03-08', '2026-03-29', '2026-04-05', '2026-09-27', '2026-10-04', '2026-10-25', '2026-11-01', '2026-12-31', '2028-02-29'];
const diffs = [];
for (const day of days) {
  const start = Date.parse(day + 'T00:00:00Z') - 86_400_000;
  for (let t = start; t < start + 3 * 86_400_000; t += 15 * 60_000) {
    const date = new Date(t + 7_000);
    const real = read(Intl, date), ours = read(cronIntl, date);
    if (real !== ours) diffs.push(date.toISOString() + ' real ' + real + ' ours ' + ours);
  }
}
process.stdout.write(JSON.stringify(diffs));
`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { env: { PATH: process.env.PATH, TZ: zone }, encoding: 'utf8', timeout: 30_000 });
  expect(run.status, run.stderr).toBe(0);
  return JSON.parse(run.stdout) as string[];
}

describe("node-cron's time of day in the CLI's bundle", () => {
  // Whole hours either side of UTC, half and quarter hours, half-hour daylight saving, the southern hemisphere.
  const zones = ['UTC', 'Europe/Berlin', 'America/New_York', 'America/St_Johns', 'Asia/Kolkata', 'Asia/Kathmandu', 'Australia/Lord_Howe', 'Pacific/Chatham', 'America/Sao_Paulo'];
  it.each(zones)('reads every instant as Intl.DateTimeFormat does in %s, daylight-saving changes included', (zone) => {
    expect(differencesIn(zone)).toEqual([]);
  });

  it('leaves a named time zone and any other question to the real Intl.DateTimeFormat', async () => {
    const { cronIntl } = (await import(MODULE)) as { cronIntl: typeof Intl };
    const date = new Date('2026-07-01T12:00:00Z');
    const options: Intl.DateTimeFormatOptions = { timeZone: 'Asia/Tokyo', hour: '2-digit', hour12: false };
    expect(new cronIntl.DateTimeFormat('en-US', options).formatToParts(date)).toEqual(new Intl.DateTimeFormat('en-US', options).formatToParts(date));
    expect(new cronIntl.DateTimeFormat('de-DE', { weekday: 'long' }).format(date)).toBe(new Intl.DateTimeFormat('de-DE', { weekday: 'long' }).format(date));
    expect(cronIntl.NumberFormat).toBe(Intl.NumberFormat);
  });

  it('keeps the bundled daemon sweeping every second without building one real DateTimeFormat', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const built = path.join(home, 'formatters');
    const hook = path.join(home, 'count-formatters.mjs');
    writeFileSync(built, '');
    // Every real formatter the daemon builds, whoever builds it, is written down with its options.
    writeFileSync(hook, `
import { appendFileSync } from 'node:fs';
const Real = Intl.DateTimeFormat;
globalThis.Intl.DateTimeFormat = new Proxy(Real, {
  construct: (target, args) => { appendFileSync(${JSON.stringify(built)}, JSON.stringify(args) + '\\n'); return Reflect.construct(target, args); },
  apply: (target, self, args) => { appendFileSync(${JSON.stringify(built)}, JSON.stringify(args) + '\\n'); return Reflect.apply(target, self, args); },
});
`);
    const env = { ...containerEnv(emu, grant, home), NODE_OPTIONS: `--import ${pathToFileURL(hook).href}` };
    const daemon = spawnDaemon(env, home, ['--sweep', '* * * * * *']);
    try {
      const { listen } = await daemon.started();
      await daemon.ready(listen);
      const lastSweep = async (): Promise<number | undefined> => {
        const metrics = await (await fetch(`${listen}/metrics`)).text();
        const value = /^syncauth_last_sweep_timestamp_seconds (\d+)/m.exec(metrics)?.[1];
        return value === undefined ? undefined : Number(value);
      };
      const first = await waitFor('a sweep', lastSweep);
      // Two more ticks of the every-second schedule (generous bounds: a shared machine).
      await waitFor('two more sweeps', async () => (((await lastSweep()) ?? 0) >= first + 2 ? true : undefined), 20_000);
      expect(readFileSync(built, 'utf8')).toBe('');
    } finally {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
    }
  });
});
