// The README's ways to install syncauth, run as written (offline, from this machine's npm cache, as
// test/e2e/npx.test.ts does), and the systemd units checked against where each install puts the binary.
//
// Each global install goes into a directory tree standing for `/`, at the prefix npm uses there: `/usr` for
// Debian's nodejs (whose `npm prefix -g` is /usr) and `/usr/local` for Node's own builds. `systemd-analyze verify
// --root=<tree>` then resolves the units' ExecStart inside that tree as systemd would on such a host: a bare name
// on systemd's fixed search path, an absolute path as given.
import { cp, mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, type TestContext } from 'vitest';
import { DEFAULT_WORKSPACE_NAME } from '../../src/emulator/index.js';
import { ROOT, tempDir } from '../helpers/cli.js';
import { findExecutable } from '../helpers/executables.js';
import { grantRefreshToken, onboardingEnv, startOnboarding } from '../helpers/onboarding.js';
import {
  NOT_IN_A_CLONE, createMachine, describe as describeRun, isCI, machineNpmCache, packPackage, run, type Machine, type Packed, type RunResult,
} from '../helpers/pack.js';

const UNITS = ['syncauth.service', 'syncauth-once.service', 'syncauth-once.timer'];
const HOST_UNITS = '/usr/lib/systemd/system';
const analyze = findExecutable('systemd-analyze');
const MISSING = 'systemd-analyze or the host units in /usr/lib/systemd/system not found: install the Debian package (apt-get install -y systemd)';
const haveSystemd = analyze !== null && existsSync(HOST_UNITS);
if (!haveSystemd && !isCI()) console.warn(`${MISSING}; skipping the install tests (they fail instead when CI is set)`);

const version = (JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const tarballName = `syncauth-${version}.tgz`;

/** The shell lines of the README's Install section, comments and blank lines left out. */
async function readmeInstallCommands(): Promise<string[]> {
  const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
  const section = /\n## Install\n([\s\S]*?)\n## /.exec(readme)?.[1] ?? '';
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
  return block.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
}

/** The commands this file runs, as the README must give them (the tests add only --offline and --prefix). */
const TESTED = {
  clone: 'npm ci && npm run build && npm install -g .',
  npx: `npx --yes ./${tarballName} setup`,
  tarball: `npm install -g ./${tarballName}`,
};

let packed: Packed | undefined;
let npmCache: string;
let machine: Machine;

function ok(result: RunResult): RunResult {
  expect(result.code, describeRun(result)).toBe(0);
  return result;
}

/** As in test/e2e/npx.test.ts: a cache without the full metadata of the dependencies is a skip outside CI. */
function requireWarmCache(context: TestContext, result: RunResult): void {
  if (!/\bENOTCACHED\b/.test(result.stderr)) return;
  const reason = `npm's cache (${npmCache}) lacks the full metadata of the runtime dependencies; see .ci/run`;
  if (isCI()) expect.fail(`${reason}\n${describeRun(result)}`);
  context.skip(reason);
}

/** A tree standing for `/`: the host's systemd units (sysinit.target …), /bin → usr/bin with kill, and ours. */
async function fakeRoot(): Promise<string> {
  const root = tempDir('syncauth-root-');
  await mkdir(path.join(root, 'usr/lib/systemd'), { recursive: true });
  await cp(HOST_UNITS, path.join(root, 'usr/lib/systemd/system'), { recursive: true, verbatimSymlinks: true });
  await mkdir(path.join(root, 'usr/bin'), { recursive: true });
  await symlink('usr/bin', path.join(root, 'bin'));
  // ExecReload=/bin/kill …
  await cp(findExecutable('kill') ?? '/usr/bin/kill', path.join(root, 'usr/bin/kill'));
  await mkdir(path.join(root, 'etc/systemd/system'), { recursive: true });
  for (const unit of UNITS) await cp(path.join(ROOT, 'deploy/systemd', unit), path.join(root, 'etc/systemd/system', unit));
  return root;
}

async function verify(root: string, units: string[] = UNITS): Promise<RunResult> {
  return run(analyze as string, ['verify', '--man=no', `--root=${root}`, ...units], {
    cwd: root, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', SYSTEMD_COLORS: '0', SYSTEMD_PAGER: '' }, timeoutMs: 60_000,
  });
}

/** systemd-analyze's lines about our units; others concern the host's. */
function aboutOurUnits(result: RunResult): string[] {
  return `${result.stdout}\n${result.stderr}`.split('\n').filter((line) => /syncauth/.test(line));
}

/** The units pass verify in `root`, where `bin` is what the install made, and `bin --version` runs. */
async function expectUnitsFindIt(root: string, bin: string): Promise<void> {
  const result = await run(bin, ['--version'], { cwd: root, env: machine.env, timeoutMs: 30_000 });
  expect(ok(result).stdout.trim()).toBe(version);
  const verified = await verify(root);
  expect(aboutOurUnits(verified), describeRun(verified)).toEqual([]);
  expect(verified.code, describeRun(verified)).toBe(0);
}

describe.skipIf(!haveSystemd && !isCI())('installing as the README says', () => {
  beforeAll(async () => {
    if (!haveSystemd) throw new Error(`${MISSING} (required in CI: CI is set)`);
    [packed, npmCache] = await Promise.all([packPackage(), machineNpmCache()]);
    machine = await createMachine({ nodeBin: process.execPath, tarball: packed.tarball, npmCache });
  }, 180_000);

  afterAll(async () => {
    await machine?.dispose();
    await packed?.dispose();
  });

  it('the README gives exactly the ways tested here, for this version, and never the unpublished name', async () => {
    expect(await readmeInstallCommands()).toEqual([TESTED.clone, TESTED.npx, TESTED.tarball]);
    for (const file of ['README.md', 'deploy/README.md', 'Dockerfile', 'deploy/systemd/syncauth.service', 'deploy/systemd/syncauth-once.service']) {
      // The Install section's warning names them, as what not to run.
      const text = (await readFile(path.join(ROOT, file), 'utf8')).replace(/\nsyncauth is not on the npm registry yet:[\s\S]*?\n\n/, '\n');
      expect([file, text.match(/npx +(--yes +)?syncauth\b|npm +(i|install) +(-g +)?syncauth\b/g)]).toEqual([file, null]);
    }
  });

  it(`from the tarball: \`${TESTED.tarball}\` into Debian's prefix /usr, where the units find it`, async (context) => {
    const root = await fakeRoot();
    const installed = await machine.run('npm', ['install', '-g', '--offline', '--prefix', path.join(root, 'usr'), `./${tarballName}`], { timeoutMs: 120_000 });
    requireWarmCache(context, installed);
    ok(installed);
    await expectUnitsFindIt(root, path.join(root, 'usr/bin/syncauth'));

    // The check can fail: the absolute path the units had is not where this install put the binary.
    const absolute = path.join(root, 'etc/systemd/system/syncauth.service');
    const text = await readFile(absolute, 'utf8');
    await writeFile(absolute, text.replace(/^ExecStart=syncauth /m, 'ExecStart=/usr/local/bin/syncauth '));
    const failed = await verify(root, ['syncauth.service']);
    expect(failed.code).not.toBe(0);
    expect(aboutOurUnits(failed).join('\n')).toMatch(/\/usr\/local\/bin\/syncauth is not executable/);
  }, 180_000);

  it(`from a clone: \`${TESTED.clone}\` into Node's prefix /usr/local, where the units find it, and it runs after a rebuild`, async (context) => {
    const root = await fakeRoot();
    // The clone inside the tree: `npm install -g .` links it, and the link must resolve there.
    const clone = path.join(root, 'srv/syncauth');
    await cp(ROOT, clone, {
      recursive: true,
      filter: (source) => {
        const relative = path.relative(ROOT, source);
        return relative === '' || !NOT_IN_A_CLONE.has(relative.split(path.sep)[0] as string);
      },
    });
    const inClone = (args: string[], env: Record<string, string> = {}) =>
      run('npm', args, { cwd: clone, env: { ...machine.env, ...env }, timeoutMs: 240_000 });
    const ci = await inClone(['ci', '--offline'], { PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: '1' });
    requireWarmCache(context, ci);
    ok(ci);
    ok(await inClone(['run', 'build']));
    ok(await inClone(['install', '-g', '--offline', '--prefix', path.join(root, 'usr/local'), '.']));
    await expectUnitsFindIt(root, path.join(root, 'usr/local/bin/syncauth'));

    // `npm install -g .` links the clone, so a later build (`npm test`, `npm run demo`, `npm pack`) replaces the
    // very file the link runs: it must leave it executable.
    ok(await inClone(['run', 'build']));
    const again = await run(path.join(root, 'usr/local/bin/syncauth'), ['--version'], { cwd: root, env: machine.env, timeoutMs: 30_000 });
    expect(ok(again).stdout.trim()).toBe(version);
  }, 400_000);

  it(`from the tarball without installing: \`${TESTED.npx}\` makes the connector`, async (context) => {
    const ob = await startOnboarding();
    try {
      const home = { dir: machine.home, configDir: path.join(machine.home, 'syncauth-config'), storeKey: 'a-store-key-for-the-install-test-0123456789' };
      const env = Object.fromEntries(
        Object.entries(onboardingEnv(ob, home, { SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob) })).filter((e): e is [string, string] => e[1] !== undefined),
      );
      // Non-interactive: the grant handed in, --yes for the questions.
      const result = await machine.run('npx', ['--offline', '--yes', `./${tarballName}`, 'setup', '--yes'], { env, timeoutMs: 150_000 });
      requireWarmCache(context, result);
      ok(result);
      const sources = [...(ob.emulator.state.workspaces.get(DEFAULT_WORKSPACE_NAME)?.sources.values() ?? [])];
      expect(sources.map((s) => ({ name: s.name, type: s.type }))).toEqual([{ name: 'dropbox-data', type: 'dropbox' }]);
    } finally {
      await ob.emulator.close();
    }
  }, 180_000);
});
