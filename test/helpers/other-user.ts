// Another user on this machine, for tests whose point is a permission: the tests run as root, which passes
// every permission check, so the refusal is provoked by running a process as nobody/nogroup (uid and gid
// 65534; Node's spawn also clears the supplementary groups, as `setpriv --clear-groups` does).
//
// That user cannot use anything under a directory it may not search. A checkout cloned into a `mktemp -d`
// directory (mode 0700) is such a place: its dist/ and node_modules/ are out of reach, and the CLI fails with
// "Cannot find module". So when the other user cannot run the checkout's CLI, it runs a copy, made once per
// test file in a directory every user can read: dist/, package.json and the runtime dependencies (the
// closure of package.json's dependencies, symlinks followed). test/cli/other-user.test.ts runs the copy
// always, so it works before a checkout needs it.
//
// Use:
//   const result = await runCliAsOtherUser(['status'], { cwd: sharedDir(), env: { SYNCAUTH_CONFIG_DIR: dir } });
//   const other = await runAsOtherUser(['cat', file]);
// and sharedDir() for a temporary directory the other user may enter (mkdtemp makes 0700 ones).
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { CLI, ROOT, nodeWarningError, tempDir, type CliResult } from './cli.js';

/** nobody/nogroup. */
export const OTHER_USER = { uid: 65534, gid: 65534 } as const;

/** A fresh temporary directory other users may enter and list (mode 0755); removed after the test file. */
export function sharedDir(prefix = 'syncauth-shared-'): string {
  const dir = tempDir(prefix);
  chmodSync(dir, 0o755);
  return dir;
}

let cli: string | undefined;

/**
 * The path of a built CLI (dist/cli/main.js) the other user can run: the checkout's when it can, else a copy
 * (copyForOtherUser). Decided on first use in this test file; `npm run build` must have run.
 */
export function otherUserCli(): string {
  if (cli === undefined) {
    const probe = spawnSync(process.execPath, [CLI, '--version'], { ...OTHER_USER, cwd: '/', env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, encoding: 'utf8' });
    cli = probe.status === 0 ? CLI : copyForOtherUser();
  }
  return cli;
}

/** Copies the built package into a fresh directory every user can read; gives the copy's dist/cli/main.js. */
export function copyForOtherUser(): string {
  const target = sharedDir('syncauth-other-user-');
  const options = { recursive: true, dereference: true } as const;
  cpSync(path.join(ROOT, 'dist'), path.join(target, 'dist'), options);
  cpSync(path.join(ROOT, 'package.json'), path.join(target, 'package.json'));
  for (const dir of runtimePackageDirs()) {
    cpSync(dir, path.join(target, 'node_modules', path.relative(path.join(ROOT, 'node_modules'), dir)), options);
  }
  // Readable whatever the umask the checkout was made with.
  const chmod = spawnSync('chmod', ['-R', 'a+rX', target], { encoding: 'utf8' });
  if (chmod.status !== 0) throw new Error(`chmod -R a+rX ${target} failed: ${chmod.stderr}`);
  return path.join(target, 'dist', 'cli', 'main.js');
}

/**
 * The top-level package directories under node_modules the package needs at run time: its dependencies and
 * theirs, optional ones when installed, found as Node finds them (the nearest node_modules upwards). A
 * package's own nested node_modules travels with it.
 */
function runtimePackageDirs(): string[] {
  const modules = path.join(ROOT, 'node_modules');
  const found = new Set<string>();
  const visit = (from: string, name: string): void => {
    let dir = from;
    let candidate: string | undefined;
    for (;;) {
      const inside = path.join(dir, 'node_modules', name);
      if (existsSync(path.join(inside, 'package.json'))) {
        candidate = inside;
        break;
      }
      if (dir === ROOT || path.dirname(dir) === dir) return; // an optional dependency not installed here
      dir = path.dirname(dir);
    }
    if (found.has(candidate)) return;
    found.add(candidate);
    for (const dependency of dependenciesOf(candidate)) visit(candidate, dependency);
  };
  for (const dependency of dependenciesOf(ROOT)) visit(ROOT, dependency);
  // Nested packages come along with the top-level package that holds them.
  return [...found].filter((dir) => !path.relative(modules, dir).includes(`${path.sep}node_modules${path.sep}`));
}

function dependenciesOf(packageDir: string): string[] {
  const manifest = JSON.parse(readFileSync(path.join(realpathSync(packageDir), 'package.json'), 'utf8')) as Record<string, Record<string, string> | undefined>;
  return [...new Set([manifest.dependencies, manifest.optionalDependencies, manifest.peerDependencies].flatMap((deps) => Object.keys(deps ?? {})))];
}

export interface OtherUserOptions {
  /** Working directory; it must be one the other user may enter (see sharedDir). Default: a fresh shared one. */
  cwd?: string;
  /** The whole environment besides PATH (and HOME, which defaults to cwd). */
  env?: Record<string, string>;
  timeoutMs?: number;
}

/**
 * Runs `argv` as the other user, with only PATH, HOME and `env` in its environment; never rejects on exit, only
 * when Node printed a warning of its own on stderr.
 */
export function runAsOtherUser(argv: string[], options: OtherUserOptions = {}): Promise<CliResult> {
  const cwd = options.cwd ?? sharedDir();
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: cwd, ...options.env };
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0] as string, argv.slice(1), { ...OTHER_USER, cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 20_000);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      const warned = nodeWarningError(argv.slice(1), stderr);
      if (warned) reject(warned);
      else resolve({ code, stdout, stderr });
    });
  });
}

/** The built CLI run as the other user (see otherUserCli). */
export function runCliAsOtherUser(args: string[], options: OtherUserOptions = {}): Promise<CliResult> {
  return runAsOtherUser([process.execPath, otherUserCli(), ...args], options);
}
