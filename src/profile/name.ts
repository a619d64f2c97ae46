import { readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { ValidationError } from '../errors.js';

// The name becomes a file name and part of a keychain account (`<profile>:<secret>`), so it keeps to an
// alphabet that is safe in both and can never collide with the keychain's `__profiles__` index entry.
export const PROFILE_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export function isProfileName(name: string): boolean {
  return PROFILE_NAME_PATTERN.test(name);
}

export function assertProfileName(name: string): void {
  if (typeof name !== 'string' || !isProfileName(name)) {
    throw new ValidationError([
      {
        field: 'profile',
        message: 'must be 1-64 letters, digits, dot, dash or underscore, starting with a letter or digit',
      },
    ]);
  }
}

/**
 * The command that authorizes a profile again (a revoked grant) or corrects its settings: the one fix users are
 * told, as the person invoked syncauth (see {@link invocation}; the daemon's logs too: a daemon started through
 * npx is best fixed through npx).
 */
export function reauthorizeCommand(profile: string): string {
  return syncauthCommand(`setup --profile ${profile}`);
}

/** `rest` (a subcommand and its arguments) as a command line the person can paste: see {@link invocation}. */
export function syncauthCommand(rest: string): string {
  return `${invocation()} ${rest}`;
}

export interface InvokedAs {
  argv: readonly string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
}

let invokedFrom: InvokedAs | undefined;
let invoked: string | undefined;

/** The binary records how it was started; a library or a test running commands in-process is `syncauth`. */
export function recordInvocation(from: InvokedAs): void {
  invokedFrom = from;
  invoked = undefined;
}

/**
 * How the person ran syncauth, to print next commands that work where they typed them: `syncauth` from the bin
 * on PATH, `npx --yes ./syncauth-1.0.0.tgz` (what npx was given) or `npx syncauth` through npx, and the script
 * itself (`node dist/cli/main.js`) otherwise. A plain `syncauth` fails with "command not found" where the
 * tool runs through npx.
 */
export function invocation(from?: InvokedAs): string {
  if (from) return invokedAs(from);
  if (!invokedFrom) return 'syncauth';
  invoked ??= invokedAs(invokedFrom);
  return invoked;
}

function invokedAs({ argv, env, cwd }: InvokedAs): string {
  const script = argv[1] ?? '';
  // A bare name was found on PATH by whoever started it (a test running commands in-process passes one too).
  if (script && !script.includes('/') && !script.includes(path.sep)) return shellWord(script);
  // npx installs into <cache>/_npx/<hash>/ and records there what it was given.
  const npx = /^(.*[\\/]_npx[\\/][^\\/]+)[\\/]node_modules[\\/]/.exec(script);
  if (npx) {
    const spec = npxSpec(path.join(npx[1] as string, 'package.json'));
    if (spec) return /^(\.|\/|~|file:)|\.tgz$/.test(spec) ? `npx --yes ${shellWord(spec)}` : `npx ${shellWord(spec)}`;
    return 'npx syncauth';
  }
  if (env.npm_command === 'exec') return 'npx syncauth';
  if (script && onPath(script, env.PATH)) return path.basename(script);
  const relative = path.relative(cwd, script);
  const shown = script && relative && !relative.startsWith('..') && !path.isAbsolute(relative) ? relative : script;
  return path.basename(script) === 'syncauth' ? shellWord(shown.includes(path.sep) ? shown : `./${shown}`) : `node ${shellWord(shown)}`;
}

function npxSpec(file: string): string | undefined {
  try {
    const packages = (JSON.parse(readFileSync(file, 'utf8')) as { _npx?: { packages?: unknown } })._npx?.packages;
    return Array.isArray(packages) && packages.length === 1 && typeof packages[0] === 'string' ? packages[0] : undefined;
  } catch {
    return undefined;
  }
}

/** Whether typing the script's name finds this very script on PATH. */
function onPath(script: string, searchPath: string | undefined): boolean {
  const name = path.basename(script);
  if (name !== 'syncauth') return false;
  try {
    const target = realpathSync(script);
    for (const dir of (searchPath ?? '').split(path.delimiter)) {
      if (!dir) continue;
      try {
        if (realpathSync(path.join(dir, name)) === target) return true;
        return false; // the first syncauth on PATH is another one
      } catch {
        // not in this directory
      }
    }
  } catch {
    return false;
  }
  return false;
}

function shellWord(word: string): string {
  return /^[A-Za-z0-9_./:=@+-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
}
