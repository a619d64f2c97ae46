// `npm run soak`: a year of token lifetimes in virtual time, then real processes for half an hour, under a
// fault schedule drawn from the seed; prints the schedule and a table, exits 1 when a target is missed.
//
//   npm run soak                      both runs, seed 1
//   npm run soak -- --virtual         the virtual-time year alone
//   npm run soak -- --real            the real-process run alone
//   npm run soak -- --seed 7 --json   another seed; JSON instead of the table
//   npm run soak -- --fleet           the fleet: 1,000 shared profiles on 3 replicas, 14 days in virtual time
//   --days N (virtual, default 365; fleet, default 14), --minutes N (real, default 30), --profiles N (fleet, default 1,000)
import { checkTargets, formatResult, formatSchedule, MINUTE } from './common.mjs';

const USAGE = 'usage: npm run soak -- [--virtual | --real | --fleet] [--seed N] [--days N] [--minutes N] [--profiles N] [--json]';

function parse(argv) {
  const options = { virtual: false, real: false, fleet: false, seed: 1, days: undefined, minutes: 30, profiles: 1000, json: false };
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
    else if (arg === '--fleet') options.fleet = true;
    else if (arg === '--profiles') options.profiles = value('--profiles');
    else if (arg === '--json') options.json = true;
    else if (arg === '--seed') options.seed = value('--seed');
    else if (arg === '--days') options.days = value('--days');
    else if (arg === '--minutes') options.minutes = value('--minutes');
    else if (arg === '--help' || arg === '-h') {
      console.log(USAGE);
      process.exit(0);
    } else throw new Error(`unknown argument ${JSON.stringify(arg)}`);
  }
  if (options.fleet && (options.virtual || options.real)) throw new Error('--fleet runs alone: give it without --virtual and --real');
  if (!options.virtual && !options.real && !options.fleet) options.virtual = options.real = true;
  options.days ??= options.fleet ? 14 : 365;
  if (options.profiles < 1) throw new Error('--profiles must be at least 1');
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
let fleet;
try {
  if (options.fleet) {
    fleet = await import('./fleet.mjs');
    progress(`fleet: ${options.days} days, ${options.profiles} profiles on 3 replicas, seed ${options.seed}; Redis is the in-process stand-in (not a redis-server)`);
    results.push(await fleet.runFleetSoak({ seed: options.seed, days: options.days, profileCount: options.profiles, log: progress }));
  }
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

// The fleet run is judged by its own targets and table (soak/fleet.mjs).
const check = (result) => (result.run === 'fleet' ? fleet.checkFleetTargets(result) : checkTargets(result));
const format = (result, misses) => (result.run === 'fleet' ? fleet.formatFleetResult(result, misses) : formatResult(result, misses));
let missed = 0;
if (options.json) {
  console.log(JSON.stringify(results.map((result) => ({ ...result, misses: check(result) })), null, 2));
  missed = results.reduce((n, r) => n + check(r).length, 0);
} else {
  for (const result of results) {
    const misses = check(result);
    missed += misses.length;
    console.log(`${formatSchedule(result)}\n\n${format(result, misses)}\n`);
  }
}
process.exit(missed > 0 ? 1 : 0);
