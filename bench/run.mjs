// `npm run bench`: measures what a user waits for and prints a table. Not a test: nothing here fails on a
// number; targets are printed beside the measurements so a regression is visible.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const cli = path.join(root, 'dist/cli/main.js');
const runs = Number(process.env.BENCH_RUNS ?? 15);

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

const run = promisify(execFile);

// Asynchronous on purpose: the emulator answers from this process, so its event loop must stay free.
async function timeOnce(args, env) {
  const start = performance.now();
  await run(process.execPath, args, { env: { ...process.env, ...env } });
  return performance.now() - start;
}

/**
 * Times several commands in interleaved rounds (a, b, c, a, b, c, …) so that a change in machine load hits
 * all of them alike; the first round warms the file-system cache and is dropped.
 */
async function timeCommands(commands) {
  const samples = commands.map(() => []);
  for (let round = 0; round <= runs; round += 1) {
    for (const [i, { args, env }] of commands.entries()) {
      const elapsed = await timeOnce(args, env ?? {});
      if (round > 0) samples[i].push(elapsed);
    }
  }
  return samples.map(median);
}

const { startEmulator, DEFAULT_EMULATOR_API_KEY } = await import(path.join(root, 'dist/emulator/index.js'));
const emulator = await startEmulator({});
const configDir = mkdtempSync(path.join(tmpdir(), 'syncauth-bench-'));
const serviceEnv = {
  SYNCAUTH_BASE_URL: emulator.url,
  SYNCAUTH_API_KEY: DEFAULT_EMULATOR_API_KEY,
  SYNCAUTH_CONFIG_DIR: configDir,
  SYNCAUTH_STORE: 'env',
};

const rows = [];
try {
  const [bare, help, list] = await timeCommands([
    { args: ['-e', '0'] },
    { args: [cli, '--help'] },
    { args: [cli, 'source', 'list'], env: serviceEnv },
  ]);
  rows.push(['node -e 0 (baseline)', bare, 1, '']);
  rows.push(['syncauth --help', help, help / bare, '≤ 1.5x']);
  rows.push(['syncauth source list (emulator)', list, list / bare, '']);
} finally {
  await emulator.close();
  rmSync(configDir, { recursive: true, force: true });
}

const header = ['measurement', 'median ms', 'x node', 'target'];
const table = [header, ...rows.map(([name, ms, ratio, target]) => [name, ms.toFixed(1), ratio.toFixed(2), target])];
const widths = header.map((_, i) => Math.max(...table.map((r) => r[i].length)));
console.log(`syncauth bench — Node ${process.version}, ${runs} runs each, median`);
for (const row of table) console.log(row.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  '));
