// The packed package, run as on a machine that never saw the repository: `npm pack` (whose `prepack` builds)
// from a clean copy of the working tree, the tarball read without extracting it, and a "machine" to run it
// on: an empty directory with only the tarball, a fresh HOME, a chosen Node first in PATH, and this
// machine's npm cache used offline, so npm installs the package's dependencies without the network.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { ROOT, watchNodeWarnings } from './cli.js';

/** True when running in CI, where a real part that cannot be found is a failure, not a skip. */
export function isCI(): boolean {
  const value = process.env.CI;
  return value !== undefined && value !== '' && value !== '0' && value.toLowerCase() !== 'false';
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

export interface RunOptions {
  cwd: string;
  env: Record<string, string>;
  timeoutMs?: number;
}

export interface Running {
  readonly child: ChildProcessWithoutNullStreams;
  /** Resolves with the first match of `pattern` in stderr so far or to come; rejects if the process ends first. */
  waitForStderr(pattern: RegExp): Promise<RegExpExecArray>;
  readonly done: Promise<RunResult>;
}

/**
 * Starts a command in its own process group, so a timeout also ends what it started (npx runs the bin
 * through a shell). The caller writes to `child.stdin` and ends it.
 */
export function start(command: string, args: string[], options: RunOptions): Running {
  const began = Date.now();
  const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
  let stdout = '';
  let stderr = '';
  let ended = false;
  const waiters: { pattern: RegExp; resolve: (m: RegExpExecArray) => void; reject: (e: Error) => void }[] = [];
  const check = () => {
    for (const waiter of [...waiters]) {
      const match = waiter.pattern.exec(stderr);
      if (match) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(match);
      }
    }
  };
  child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
    check();
  });
  watchNodeWarnings(`${command} ${args.join(' ')}`, () => stderr);
  // A process that exits without reading its stdin must not crash the test with EPIPE.
  child.stdin.on('error', () => {});
  const timer = setTimeout(() => {
    try {
      process.kill(-(child.pid as number), 'SIGKILL');
    } catch {
      child.kill('SIGKILL');
    }
  }, options.timeoutMs ?? 120_000);
  const done = new Promise<RunResult>((resolve, reject) => {
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      ended = true;
      const result = { code, signal, stdout, stderr, ms: Date.now() - began };
      for (const waiter of waiters.splice(0)) {
        waiter.reject(new Error(`\`${command} ${args.join(' ')}\` ended (${code ?? signal}) before stderr matched ${waiter.pattern}\n${describe(result)}`));
      }
      resolve(result);
    });
  });
  return {
    child,
    done,
    waitForStderr(pattern) {
      return new Promise((resolve, reject) => {
        const match = pattern.exec(stderr);
        if (match) resolve(match);
        else if (ended) reject(new Error(`the process ended before stderr matched ${pattern}`));
        else waiters.push({ pattern, resolve, reject });
      });
    },
  };
}

/** Runs a command to the end with `stdin` (default: nothing) on its standard input. */
export function run(command: string, args: string[], options: RunOptions & { stdin?: string }): Promise<RunResult> {
  const running = start(command, args, options);
  running.child.stdin.end(options.stdin ?? '');
  return running.done;
}

/** Everything about a finished process, for an assertion message. */
export function describe(result: RunResult): string {
  return `exit ${result.code ?? result.signal} after ${result.ms} ms\n--- stdout ---\n${result.stdout}\n--- stderr ---\n${result.stderr}`;
}

/** A package.json-style bin shebang and `npm` both find `node` on PATH: the Node under test goes first. */
function pathFor(nodeBin: string): string {
  const inherited = (process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin')
    .split(path.delimiter)
    // Nothing of the repository: under `npm test` PATH starts with its node_modules/.bin.
    .filter((dir) => dir !== '' && !dir.split(path.sep).includes('node_modules') && path.relative(ROOT, dir).startsWith('..'));
  return [...new Set([path.dirname(nodeBin), ...inherited])].join(path.delimiter);
}

// ---------------------------------------------------------------------------------------------------------
// Packing

export interface TarEntry {
  path: string;
  mode: number;
  data: Buffer;
}

/** The files of a .tgz as npm wrote it (ustar, with pax headers for long names), paths without `package/`. */
export function readTarball(gz: Buffer): Map<string, TarEntry> {
  const tar = gunzipSync(gz);
  const entries = new Map<string, TarEntry>();
  let paxPath: string | undefined;
  let offset = 0;
  const text = (start: number, length: number) => {
    const raw = tar.subarray(start, start + length);
    const end = raw.indexOf(0);
    return raw.subarray(0, end === -1 ? raw.length : end).toString('utf8');
  };
  while (offset + 512 <= tar.length) {
    if (tar.subarray(offset, offset + 512).every((b) => b === 0)) break;
    const name = text(offset, 100);
    const mode = parseInt(text(offset + 100, 8).trim() || '0', 8);
    const size = parseInt(text(offset + 124, 12).trim() || '0', 8);
    const type = String.fromCharCode(tar[offset + 156] ?? 0);
    const prefix = text(offset + 345, 155);
    const data = tar.subarray(offset + 512, offset + 512 + size);
    offset += 512 + Math.ceil(size / 512) * 512;
    if (type === 'x') {
      paxPath = /\d+ path=([^\n]*)\n/.exec(data.toString('utf8'))?.[1];
      continue;
    }
    if (type === 'g') continue;
    const full = paxPath ?? (prefix ? `${prefix}/${name}` : name);
    paxPath = undefined;
    if (type === '0' || type === '\0') entries.set(full.replace(/^package\//, ''), { path: full, mode, data: Buffer.from(data) });
  }
  return entries;
}

export interface Packed {
  /** Holds the clean copy and the tarball; removed by `dispose`. */
  dir: string;
  tarball: string;
  /** `syncauth-<version>.tgz` */
  filename: string;
  bytes: number;
  entries: Map<string, TarEntry>;
  ms: number;
  dispose(): Promise<void>;
}

// What a fresh clone has not got (build output, installed modules, caches, a developer's secrets).
export const NOT_IN_A_CLONE = new Set(['node_modules', 'dist', '.git', '.cache', 'coverage', '.env']);

/**
 * `npm pack --pack-destination <tmp>` (its `prepack` builds) in a copy of the working tree without `dist/`,
 * `node_modules/` (linked, not copied) or `.env`. Packing in the repository itself would rebuild `dist/`
 * while other test files run the CLI from it; the copy also packs exactly what a clean clone would, with no
 * stale files left in `dist/` by an earlier build. A canary `.env` in the copy must stay out of the tarball.
 */
export async function packPackage(): Promise<Packed> {
  const began = Date.now();
  const dir = await mkdtemp(path.join(tmpdir(), 'syncauth-pack-'));
  const checkout = path.join(dir, 'checkout');
  const out = path.join(dir, 'out');
  await mkdir(out);
  try {
    await cp(ROOT, checkout, {
      recursive: true,
      filter: (source) => {
        const relative = path.relative(ROOT, source);
        return relative === '' || !NOT_IN_A_CLONE.has(relative.split(path.sep)[0] as string);
      },
    });
    await symlink(path.join(ROOT, 'node_modules'), path.join(checkout, 'node_modules'), 'dir');
    await writeFile(path.join(checkout, '.env'), 'SYNCAUTH_API_KEY=canary-must-not-be-packed\n');
    const result = await run('npm', ['pack', '--pack-destination', out, '--no-fund', '--no-audit'], {
      cwd: checkout,
      env: { ...process.env } as Record<string, string>,
      timeoutMs: 150_000,
    });
    if (result.code !== 0) throw new Error(`npm pack failed\n${describe(result)}`);
    const tarballs = (await readdir(out)).filter((f) => f.endsWith('.tgz'));
    if (tarballs.length !== 1) throw new Error(`npm pack left ${tarballs.length} tarballs in ${out}: ${tarballs.join(', ')}`);
    const filename = tarballs[0] as string;
    const tarball = path.join(out, filename);
    const gz = await readFile(tarball);
    return {
      dir,
      tarball,
      filename,
      bytes: gz.length,
      entries: readTarball(gz),
      ms: Date.now() - began,
      dispose: () => rm(dir, { recursive: true, force: true }),
    };
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}

// ---------------------------------------------------------------------------------------------------------
// A machine that never saw the repository

/** This machine's npm cache, as `npm config get cache` answers it (where `npm ci` put the dependencies). */
export async function machineNpmCache(): Promise<string> {
  const result = await run('npm', ['config', 'get', 'cache'], { cwd: tmpdir(), env: { ...process.env } as Record<string, string>, timeoutMs: 30_000 });
  const cache = result.stdout.trim().split('\n').pop()?.trim();
  if (result.code !== 0 || !cache || !existsSync(path.join(cache, '_cacache'))) {
    throw new Error(`no usable npm cache (\`npm config get cache\` answered "${cache ?? ''}"): run \`npm ci\` first\n${describe(result)}`);
  }
  return cache;
}

export interface Machine {
  /** The fresh temporary directory everything below lives in. */
  root: string;
  /** The working directory: empty but for the tarball, as a user who downloaded it. */
  cwd: string;
  home: string;
  /** The Node binary first in PATH. */
  node: string;
  /** The environment of every command on this machine. */
  env: Record<string, string>;
  run(command: string, args: string[], options?: { env?: Record<string, string>; stdin?: string; timeoutMs?: number }): Promise<RunResult>;
  start(command: string, args: string[], options?: { env?: Record<string, string>; timeoutMs?: number }): Running;
  dispose(): Promise<void>;
}

/**
 * A fresh machine: `<root>/work` holds only a copy of the tarball, HOME is `<root>/home` (no ~/.npmrc, no
 * profile, no keychain), `nodeBin`'s directory comes first in PATH, and npm reads the packages from this
 * machine's cache with `--offline` (the commands pass it). The npm cache directory is private and links
 * `_cacache` (the packages) to the machine's: npx keys its install directory by the spec as typed
 * (`./syncauth-0.1.0.tgz`), so a shared `_npx` would hand a later run an earlier tarball's install and
 * leave installs behind in the machine's cache.
 */
export async function createMachine(options: { nodeBin: string; tarball: string; npmCache: string }): Promise<Machine> {
  const root = await mkdtemp(path.join(tmpdir(), 'syncauth-machine-'));
  const cwd = path.join(root, 'work');
  const home = path.join(root, 'home');
  const npmCache = path.join(root, 'npm-cache');
  await Promise.all([mkdir(cwd), mkdir(home), mkdir(npmCache)]);
  await symlink(path.join(options.npmCache, '_cacache'), path.join(npmCache, '_cacache'), 'dir');
  await cp(options.tarball, path.join(cwd, path.basename(options.tarball)));
  const env: Record<string, string> = {
    PATH: pathFor(options.nodeBin),
    HOME: home,
    npm_config_cache: npmCache,
    // Nothing that would reach the network behind --offline's back, and less noise.
    npm_config_update_notifier: 'false',
    npm_config_fund: 'false',
    npm_config_audit: 'false',
    npm_config_progress: 'false',
  };
  if (process.env.TMPDIR) env.TMPDIR = process.env.TMPDIR;
  const merged = (extra?: Record<string, string>) => ({ ...env, ...extra });
  return {
    root,
    cwd,
    home,
    node: options.nodeBin,
    env,
    run: (command, args, o = {}) => run(command, args, { cwd, env: merged(o.env), ...(o.stdin !== undefined ? { stdin: o.stdin } : {}), ...(o.timeoutMs ? { timeoutMs: o.timeoutMs } : {}) }),
    start: (command, args, o = {}) => start(command, args, { cwd, env: merged(o.env), ...(o.timeoutMs ? { timeoutMs: o.timeoutMs } : {}) }),
    dispose: () => rm(root, { recursive: true, force: true }),
  };
}
