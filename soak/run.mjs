// `npm run soak`: a year of token lifetimes in virtual time, then real processes for half an hour, under a
// fault schedule drawn from the seed; prints the schedule and a table, exits 1 when a target is missed.
//
//   npm run soak                      both runs, seed 1
//   npm run soak -- --virtual         the virtual-time year alone
//   npm run soak -- --real            the real-process run alone
//   npm run soak -- --seed 7 --json   another seed; JSON instead of the table
//   --days N (virtual, default 365), --minutes N (real, default 30)
import { checkTargets, formatResult, formatSchedule, MINUTE } from './common.mjs';

const USAGE = 'usage: npm run soak -- [--virtual | --real] [--seed N] [--days N] [--minutes N] [--json]';

function parse(argv) {
  const options = { virtual: false, real: false, seed: 1, days: 365, minutes: 30, json: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = (name) => {
      const raw = argv[++i];
      const n = Number(raw);
      if (raw === undefined || !Number.isInteger(n) || n < 0) throw new Error(`${name} needs a whole number (got ${raw === undefined ? 'nothing' : JSON.stringify(raw)})`);
      return n;
    };
    if (arg === '--virtual') options.virtual = true;
    else if (arg === '--real') options.real = true;
    else if (arg === '--json') options.json = true;
    else if (arg === '--seed') options.seed = value('--seed');
    else if (arg === '--days') options.days = value('--days');
    else if (arg === '--minutes') options.minutes = value('--minutes');
    else if (arg === '--help' || arg === '-h') {
      console.log(USAGE);
      process.exit(0);
    } else throw new Error(`unknown argument ${JSON.stringify(arg)}`);
  }
  if (!options.virtual && !options.real) options.virtual = options.real = true;
  if (options.days < 2) throw new Error('--days must be at least 2 (the first and last day are kept quiet)');
  return options;
}

let options;
try {
  options = parse(process.argv.slice(2));
} catch (error) {
  console.error(`soak: ${error.message}\n${USAGE}`);
  process.exit(2);
}

const progress = options.json ? () => {} : (line) => console.error(line);
const results = [];
try {
  if (options.virtual) {
    const { runVirtualSoak } = await import('./virtual.mjs');
    progress(`virtual: ${options.days} days, seed ${options.seed}`);
    results.push(await runVirtualSoak({ seed: options.seed, days: options.days, log: progress }));
  }
  if (options.real) {
    const { runRealSoak } = await import('./real.mjs');
    progress(`real: ${options.minutes} minutes, seed ${options.seed}`);
    results.push(await runRealSoak({ seed: options.seed, durationMs: options.minutes * MINUTE, log: progress }));
  }
} catch (error) {
  console.error(`soak: the run itself failed (seed ${options.seed}): ${error.stack ?? error}`);
  process.exit(1);
}

let missed = 0;
if (options.json) {
  console.log(JSON.stringify(results.map((result) => ({ ...result, misses: checkTargets(result) })), null, 2));
  missed = results.reduce((n, r) => n + checkTargets(r).length, 0);
} else {
  for (const result of results) {
    const misses = checkTargets(result);
    missed += misses.length;
    console.log(`${formatSchedule(result)}\n\n${formatResult(result, misses)}\n`);
  }
}
process.exit(missed > 0 ? 1 : 0);
