// Every command the README and docs/ show in a shell block runs as printed, against the emulator, and exits
// as the page says; or it is in NOT_RUN below, with the reason it cannot run here. A new example is run by
// default, so none slips in untested; an entry of the tables no page shows any more fails the test too.
//
// Each block runs in a world of its own, side by side with the others: an in-process emulator holding the ids
// the pages use (workflow 6f1c2d7e-…, source connector 3fa85f64-…, a job, a destination), a private HOME
// that is also the working directory (with the files the examples name: dropbox.json, worker.py, …), the
// profiles `default` and `docs` set up in the encrypted file store (key in SYNCAUTH_STORE_KEY), `syncauth`
// on PATH as the built CLI, and a browser that clicks Allow. The environment says only where Dropbox is (the
// emulator's URLs); the service's URL and key come from each profile, as after a real setup. Commands that
// write under /run run in a private mount namespace with its own /run (tmpfs), so nothing on this machine
// is touched. The commands of a block run in order, each as `sh -c LINE`.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_EMULATOR_API_KEY } from '../../src/emulator/index.js';
import { ServiceClient } from '../../src/service/client.js';
import { nodeWarnings, tempDir, type CliResult } from '../helpers/cli.js';
import { docFiles, quickStartCommands, shellBlocks, syncauthOnPath, type DocBlock, type DocCommand } from '../helpers/docs.js';
import { runInProcess } from '../helpers/in-process.js';
import {
  grantRefreshToken, newHome, onboardingEnv, renewAtEmulator, startOnboarding, type Home, type Onboarding,
} from '../helpers/onboarding.js';
import { waitFor } from '../helpers/wait.js';

/** The ids the pages show, and what they stand for in every world. */
const IDS = {
  workflow: '6f1c2d7e-2b1a-4c3d-9e8f-0a1b2c3d4e5f',
  source: '3fa85f64-5717-4562-b3fc-2c963f66afa6',
  job: '7c9e6679-7425-40de-944b-e07fc1f90ae7',
  destination: '0b7a3a52-7d4e-4b8e-9c1f-2a3b4c5d6e7f',
};
/** A second API key of the workspace: what `profile rotate api-key` is given as $NEW_API_KEY. */
const NEW_API_KEY = 'a-second-key-of-the-same-workspace-0123456789';

/** Commands shown but not run here, and why. Keyed by the command as printed, without its comment. */
const NOT_RUN: Record<string, string> = {
  'syncauth setup': 'asks its questions at a terminal and opens a browser: the quick start\'s walk-through (test/e2e/quickstart.test.ts) runs it in tmux',
  'npm ci && npm run demo': 'npm ci replaces node_modules and `npm run demo` rebuilds dist/, which the tests running beside this one use; '
    + 'what the demo runs, `syncauth demo`, is run below',
  'npm run demo -- --reauth': '`npm run demo` rebuilds dist/, which the tests running beside this one use; test/e2e/demo-reauth.test.ts runs `syncauth demo --reauth`',
  'npm run demo -- --reauth --browser': 'waits for a person to click Allow in a browser; test/e2e/demo-reauth.test.ts runs `syncauth demo --reauth`',
  'npm test': 'the whole suite, this test included',
  'npm ci && npm run build && npm install -g .': 'installs globally from the npm registry; test/deploy/install.test.ts runs it offline in a private prefix',
  'npx --yes ./syncauth-0.1.0.tgz setup': 'needs the packed tarball and npm\'s cache; test/deploy/install.test.ts runs it',
  'npm install -g ./syncauth-0.1.0.tgz': 'installs globally; test/deploy/install.test.ts runs it in a private prefix',
  'npm run soak': 'the year soak takes over half an hour; npm test runs slices of it (test/soak-regressions/)',
  'npm run soak -- --virtual': 'the virtual year takes minutes of both cores; npm test runs a twelve-day slice (test/soak-regressions/virtual.test.ts)',
  'npm run soak -- --seed 7 --json': 'as above, with another seed',
  'npm run soak -- --fleet --days 14': 'fourteen simulated days at 1,000 profiles take half an hour of both cores; npm test runs a three-day slice of 100 profiles (test/soak-regressions/fleet.test.ts)',
  'syncauth notify test --notify-url https://hooks.example.com/syncauth':
    'sends a signed test event to hooks.example.com, which tests cannot reach; test/notify/cli.test.ts runs `notify test` against a local receiver',
  "syncauth daemon --token-file '/run/syncauth/{profile}.token' --redis-url redis://127.0.0.1:6379":
    'needs a Redis at the fixed port 6379, shared by everything on this machine; the replica tests run these flags against a real redis-server on a free port',
};

interface World {
  ob: Onboarding;
  home: Home;
  env: Record<string, string>;
}

interface Run {
  result: CliResult;
  world: World;
}

/** How a command is run when not the plain way (exit 0, nothing on stdin), and what is checked after it. */
interface How {
  stdin?: string | ((world: World) => string);
  env?: (world: World) => Record<string, string>;
  /** The exit code the page implies, when not 0. */
  code?: number;
  /** A command that runs until stopped: started, judged ready, sent `stop`, and then must exit with `code`. */
  background?: { ready: (output: string, world: World) => boolean; stop: NodeJS.Signals };
  /** `--no-browser`: the person copies the code from Dropbox's page and pastes it. */
  paste?: boolean;
  check?: (run: Run) => void | Promise<void>;
}

const sourcesOf = (w: World) => [...(w.ob.emulator.state.workspaces.get('default')?.sources.values() ?? [])];
const workflowOf = (w: World) => w.ob.emulator.state.workspaces.get('default')?.workflows.get(IDS.workflow);
const profiles = (w: World) => {
  const dir = path.join(w.home.configDir, 'profiles');
  return existsSync(dir) ? readdirSync(dir).sort().join('\n') : '';
};
const logged = (event: string) => (output: string) => output.includes(`"event":"${event}"`);

const HOW: Record<string, How> = {
  // docs/setup.md
  'syncauth setup --no-browser': { paste: true, env: () => ({ SYNCAUTH_REMOTE_URL: 'dropbox://data' }), check: ({ world }) => expect(profiles(world)).toMatch(/^default\.json$/m) },
  'syncauth setup --profile docs --workflow-id 6f1c2d7e-2b1a-4c3d-9e8f-0a1b2c3d4e5f --schedule "every 4 hours"': {
    env: () => ({ SYNCAUTH_REMOTE_URL: 'dropbox://inbox' }),
    check: ({ world }) => {
      const docs = sourcesOf(world).find((s) => s.name === 'dropbox-inbox');
      expect(workflowOf(world)?.sources).toEqual([docs?.id]);
      expect(workflowOf(world)?.schedule?.crontab_entries[0]?.cron_expression).toBe('0 */4 * * *');
    },
  },
  'SYNCAUTH_REFRESH_TOKEN="$REFRESH_TOKEN" syncauth setup --yes': {},
  // docs/commands.md
  'syncauth authorize': {
    env: (w) => ({ SYNCAUTH_APP_KEY: w.ob.app.appKey, SYNCAUTH_APP_SECRET: w.ob.app.appSecret }),
    check: ({ result, world }) => expect(result.stdout.trim()).toBe([...world.ob.emulator.state.grants.values()].at(-1)?.refreshToken),
  },
  'syncauth token': { check: ({ result, world }) => expect(world.ob.emulator.state.accessTokens.has(result.stdout.trim())).toBe(true) },
  'syncauth token --force': { check: ({ result, world }) => expect([...world.ob.emulator.state.accessTokens.keys()].at(-1)).toBe(result.stdout.trim()) },
  'syncauth status --json': { check: ({ result }) => expect(JSON.parse(result.stdout)).toBeTruthy() },
  'syncauth logout --profile docs --no-revoke': { check: ({ world }) => expect(profiles(world)).not.toMatch(/^docs\.json$/m) },
  'syncauth logout': { check: ({ world }) => expect(profiles(world)).not.toMatch(/^default\.json$/m) },
  "printf '%s\\n' \"$NEW_API_KEY\" | syncauth profile rotate api-key --profile docs": {},
  'syncauth profile rotate app-secret --profile docs': { stdin: (w) => `${w.ob.app.appSecret}\n` },
  'syncauth source check 3fa85f64-5717-4562-b3fc-2c963f66afa6': {},
  'syncauth source delete 3fa85f64-5717-4562-b3fc-2c963f66afa6 --yes': { check: ({ world }) => expect(sourcesOf(world).map((s) => s.id)).not.toContain(IDS.source) },
  'syncauth workflow run 6f1c2d7e-2b1a-4c3d-9e8f-0a1b2c3d4e5f': {
    check: ({ world }) => expect([...(world.ob.emulator.state.workspaces.get('default')?.jobs.values() ?? [])].some((j) => j.workflow_id === IDS.workflow)).toBe(true),
  },
  'syncauth emulate --port 8765': { background: { ready: (out) => out.includes('export SYNCAUTH_BASE_URL=http://127.0.0.1:8765'), stop: 'SIGINT' } },
  'syncauth emulate --token-lifetime 20 --fault token:503:0.3 --fault sources:429:1:2': { background: { ready: (out) => out.includes('export SYNCAUTH_BASE_URL='), stop: 'SIGINT' } },
  'syncauth emulate --redirect-uri http://127.0.0.1:8443/reauthorize/callback': {
    background: { ready: (out) => out.includes('http://127.0.0.1:8443/reauthorize/callback;'), stop: 'SIGINT' },
  },
  'curl -s -X POST -H "Authorization: Bearer $(syncauth token)" "$SYNCAUTH_DROPBOX_API_URL/2/auth/token/revoke"': {
    check: ({ result, world }) => {
      expect(result.stdout).toBe('null');
      expect([...world.ob.emulator.state.grants.values()].filter((g) => g.revokedAt !== null).length).toBeGreaterThan(0);
    },
  },
  'curl -s -X POST -d app_key=emu1appkey2k3y4 "$SYNCAUTH_DROPBOX_API_URL/account/connected_apps/disconnect"': {
    check: ({ result, world }) => {
      expect(JSON.parse(result.stdout)).toMatchObject({ app_key: 'emu1appkey2k3y4' });
      expect([...world.ob.emulator.state.grants.values()].filter((g) => g.revokedAt === null && g.accountId === world.ob.emulator.state.account.accountId)).toEqual([]);
    },
  },
  "echo 'source <(syncauth completion bash)' >> ~/.bashrc": { check: ({ world }) => expect(readFileSync(path.join(world.home.dir, '.bashrc'), 'utf8')).toContain('syncauth completion bash') },
  'syncauth completion fish > ~/.config/fish/completions/syncauth.fish': {
    check: ({ world }) => expect(readFileSync(path.join(world.home.dir, '.config/fish/completions/syncauth.fish'), 'utf8')).toMatch(/complete -c syncauth/),
  },
  // README.md's quick start (setup itself is walked at a terminal by test/e2e/quickstart.test.ts)
  'syncauth daemon': { background: { ready: (out) => logged('daemon.started')(out), stop: 'SIGTERM' } },
  // docs/daemon.md
  'syncauth daemon --listen 127.0.0.1:9464': {
    background: { ready: (out) => logged('daemon.started')(out), stop: 'SIGTERM' },
  },
  'syncauth daemon --profile docs --token-file /run/syncauth/token': { background: { ready: (out) => logged('daemon.started')(out), stop: 'SIGTERM' } },
  'syncauth daemon --once --profile docs --token-file /run/syncauth/token': {},
  // docs/notices.md: each line runs in a shell of its own, so what the block exports comes from here.
  'syncauth daemon --notify-url https://hooks.example.com/syncauth': {
    env: () => ({ SYNCAUTH_NOTIFY_SECRET: `whsec_${Buffer.alloc(32, 7).toString('base64')}` }),
    background: { ready: (out) => logged('daemon.started')(out) && out.includes('"notify":["https://hooks.example.com"]'), stop: 'SIGTERM' },
  },
  'syncauth daemon --notify-format slack': {
    env: () => ({ SYNCAUTH_NOTIFY_URL: 'https://hooks.slack.com/services/T0000/B0000/XXXX' }),
    background: { ready: (out) => logged('daemon.started')(out) && out.includes('"notifyFormat":"slack"'), stop: 'SIGTERM' },
  },
  // docs/reauthorization.md
  'syncauth daemon --profile docs --token-file /run/syncauth/token --reauth-listen 127.0.0.1:8443 --public-url https://syncauth.example.com': {
    background: { ready: (out) => logged('daemon.started')(out), stop: 'SIGTERM' },
  },
  // docs/when-a-person-is-needed.md: the page and the notices together; the block's export comes from here.
  'syncauth daemon --profile docs --token-file /run/syncauth/token --reauth-listen 127.0.0.1:8443 --public-url https://syncauth.example.com --notify-url https://hooks.example.com/syncauth': {
    env: () => ({ SYNCAUTH_NOTIFY_SECRET: `whsec_${Buffer.alloc(32, 7).toString('base64')}` }),
    background: { ready: (out) => logged('daemon.started')(out) && out.includes('"notify":["https://hooks.example.com"]'), stop: 'SIGTERM' },
  },
  // docs/exec.md: worker.py exits 0 only when it was given a token (and, with --clean-env, nothing else secret).
  'syncauth exec --profile docs --watch -- python3 worker.py': {},
};

/** The files the examples name, as the person would have them in the directory they run in. */
async function writeFiles(world: World, accessToken: string): Promise<void> {
  const dir = world.home.dir;
  const dropbox = (recursive: boolean) => JSON.stringify({ remote_url: 'dropbox://data', recursive, token: accessToken });
  writeFileSync(path.join(dir, 'dropbox.json'), dropbox(true));
  writeFileSync(path.join(dir, 'new.json'), dropbox(false));
  writeFileSync(path.join(dir, 's3.json'), JSON.stringify({ remote_url: 's3://bucket/out', anonymous: true }));
  writeFileSync(path.join(dir, 'nodes.json'), JSON.stringify([{ name: 'Partitioner', type: 'partition', subtype: 'vlm', settings: { provider: 'x' } }]));
  writeFileSync(path.join(dir, 'worker.py'), [
    'import os, sys',
    "token = os.environ.get('DROPBOX_ACCESS_TOKEN', '')",
    "secret = ('SYNCAUTH_STORE_KEY', 'SYNCAUTH_API_KEY', 'SYNCAUTH_APP_KEY', 'SYNCAUTH_APP_SECRET', 'SYNCAUTH_REFRESH_TOKEN')",
    'sys.exit(0 if token.startswith("sl.") and not [k for k in os.environ if k in secret] else 3)',
    '',
  ].join('\n'));
  writeFileSync(path.join(dir, 'rclone.conf.tpl'), [
    '[dropbox]', 'type = dropbox', 'token = {"access_token":"{{ access_token }}","token_type":"bearer","expiry":"{{ expires_at }}"}', '',
  ].join('\n'));
  writeFileSync(path.join(dir, 'app'), '#!/bin/sh\n# reads the rendered rclone config, as rclone would\ngrep -q \'"access_token":"sl\\.\' "$2"\n', { mode: 0o755 });
  mkdirSync(path.join(dir, '.config/fish/completions'), { recursive: true });
}

/** Moves an object of the emulator's workspace to the id the pages show. */
function rekey<T extends { id: string }>(map: Map<string, T>, from: string, to: string): void {
  const item = map.get(from) as T;
  map.delete(from);
  map.set(to, { ...item, id: to });
}

async function makeWorld(withProfiles: boolean): Promise<World> {
  const ob = await startOnboarding({
    emulator: { workspaces: [{ name: 'default', apiKeys: [DEFAULT_EMULATOR_API_KEY, NEW_API_KEY] }], jobStepMs: 120_000, checkDelayMs: 0 },
  });
  const ws = ob.emulator.state.workspaces.get('default');
  if (!ws) throw new Error('no workspace');
  rekey(ws.workflows, ob.emulator.seeded?.workflowId as string, IDS.workflow);
  const client = new ServiceClient({ baseUrl: ob.emulator.url, apiKey: ob.apiKey });
  const refreshToken = await grantRefreshToken(ob);
  const accessToken = (await renewAtEmulator(ob, refreshToken)).body.access_token as string;
  try {
    const source = await client.createSourceUntyped({ name: 'reports-archive', type: 'dropbox', config: { remote_url: 'dropbox://data', recursive: true, token: accessToken } });
    rekey(ws.sources, source.id, IDS.source);
    const destination = await client.createDestination({ name: 'archive', type: 's3', config: { remote_url: 's3://bucket/archive', anonymous: true } } as never);
    rekey(ws.destinations, destination.id, IDS.destination);
    const nightly = await client.createWorkflow({ name: 'nightly', workflow_type: 'basic' });
    const job = await client.runWorkflow(nightly.id);
    rekey(ws.jobs, job.id, IDS.job);
  } finally {
    await client.close();
  }

  const home = newHome();
  mkdirSync(home.dir, { recursive: true });
  const full = onboardingEnv(ob, home);
  const env: Record<string, string> = {
    PATH: `${syncauthOnPath(tempDir('syncauth-bin-'))}:/usr/bin:/bin`,
    HOME: home.dir,
    SYNCAUTH_CONFIG_DIR: home.configDir,
    SYNCAUTH_STORE: 'file',
    SYNCAUTH_STORE_KEY: home.storeKey,
    SYNCAUTH_AUTHORIZE_URL: full.SYNCAUTH_AUTHORIZE_URL as string,
    SYNCAUTH_TOKEN_URL: full.SYNCAUTH_TOKEN_URL as string,
    SYNCAUTH_DROPBOX_API_URL: full.SYNCAUTH_DROPBOX_API_URL as string,
    SYNCAUTH_REDIRECT_URI: ob.redirectUri,
    NEW_API_KEY,
    REFRESH_TOKEN: refreshToken,
    BROWSER: path.join(home.dir, 'browser-allow.sh'),
  };
  // The browser setup and authorize open: it clicks Allow (the emulator approves at once) and follows the
  // redirect back to the command's callback, as a browser would.
  writeFileSync(env.BROWSER as string, `#!/bin/sh\nexec '${process.execPath}' -e 'fetch(process.argv[1],{redirect:"manual"}).then(r=>fetch(r.headers.get("location"))).then(r=>r.text())' "$1"\n`, { mode: 0o755 });
  const world: World = { ob, home, env };
  await writeFiles(world, accessToken);
  if (withProfiles) {
    for (const [profile, remote] of [['default', 'dropbox://data'], ['docs', 'dropbox://inbox']] as const) {
      const made = await runInProcess(['setup', '--yes', '--no-check', '--profile', profile, '--remote-url', remote], {
        cwd: home.dir, env: { ...onboardingEnv(ob, home), SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob) },
      });
      if (made.code !== 0) throw new Error(`setting up profile ${profile} failed (${made.code}):\n${made.stderr}`);
    }
  } else {
    // The block that shows setup itself: the person has the values at hand (here in the environment).
    Object.assign(env, { SYNCAUTH_BASE_URL: ob.emulator.url, SYNCAUTH_API_KEY: ob.apiKey, SYNCAUTH_APP_KEY: ob.app.appKey, SYNCAUTH_APP_SECRET: ob.app.appSecret });
  }
  return world;
}

/** `sh -c LINE`, in a private mount namespace with its own /run when the line writes there. */
function shellArgv(line: string, background: boolean): string[] {
  const script = background ? `exec ${line}` : line;
  if (!/(^|[\s:'"])\/run\//.test(line)) return ['/bin/sh', '-c', script];
  return ['unshare', '--mount', '--propagation', 'private', '/bin/sh', '-c',
    'mount -t tmpfs -o mode=0755 tmpfs /run && mkdir -m 0750 /run/syncauth /run/app && exec /bin/sh -c "$1"', 'sh', script];
}

/** What ends each command still running, should a test end without it (a failure, a time-out). */
const groups = new Set<() => void>();
afterAll(() => {
  for (const kill of groups) kill();
});

async function runCommand(command: DocCommand, how: How, world: World): Promise<CliResult> {
  const env = { ...world.env, ...how.env?.(world) };
  const argv = shellArgv(command.text, how.background !== undefined);
  // In a process group of its own: a command that outlasts its deadline is ended with everything it started.
  const child = spawn(argv[0] as string, argv.slice(1), { cwd: world.home.dir, env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
  const killGroup = (): void => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // Gone already.
    }
  };
  groups.add(killGroup);
  // A command that needs no input may be gone before its stdin is closed.
  child.stdin.on('error', () => {});
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
  child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
  const timer = setTimeout(killGroup, 60_000);
  const exit = new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      groups.delete(killGroup);
      resolve(code);
    });
  });
  if (how.paste) {
    // Dropbox's page shows a code after Allow; the person pastes it where the command waits.
    const url = await waitFor('the authorize URL', () => /\s(http:\/\/127\.0\.0\.1:\d+\/oauth2\/authorize\?\S+)/.exec(stderr)?.[1], 20_000);
    const page = await (await fetch(url)).text();
    const code = /<code id="code">([^<]+)<\/code>/.exec(page)?.[1];
    child.stdin.end(`${code ?? ''}\n`);
  } else if (how.background) {
    child.stdin.end();
    const { ready, stop } = how.background;
    await waitFor(`${command.key} to be ready`, () => (ready(stdout + stderr, world) || child.exitCode !== null ? true : undefined), 30_000);
    // The signal handlers are set up just after the line that says it started.
    await new Promise((resolve) => setTimeout(resolve, 500));
    child.kill(stop);
  } else {
    const stdin = typeof how.stdin === 'function' ? how.stdin(world) : how.stdin;
    child.stdin.end(stdin ?? '');
  }
  return { code: await exit, stdout, stderr };
}

const blocks: DocBlock[] = docFiles().flatMap((file) => shellBlocks(file));
const worlds: World[] = [];
afterAll(async () => {
  await Promise.all(worlds.map((w) => w.ob.emulator.close()));
});

describe('the examples of the README and docs/', () => {
  it('every command shown is run here or listed with the reason it cannot be; no table names a command no page shows', () => {
    const shown = new Set(blocks.flatMap((b) => b.commands.map((c) => c.key)));
    expect(shown.size).toBeGreaterThan(40);
    const stale = [...Object.keys(NOT_RUN), ...Object.keys(HOW)].filter((key) => !shown.has(key));
    expect(stale, 'entries for commands no page shows any more').toEqual([]);
    for (const key of Object.keys(NOT_RUN)) expect(HOW[key], `${key} is both run and not run`).toBeUndefined();
    // The quick start is walked in order, at a terminal, by test/e2e/quickstart.test.ts; its setup is listed here.
    expect(quickStartCommands().map((c) => c.key)[0]).toBe('syncauth setup');
  });

  it('the demo (`npm run demo` without its build) runs the main job on the emulator and exits 0', async () => {
    const home = newHome();
    mkdirSync(home.dir, { recursive: true });
    const argv = shellArgv('syncauth demo', false);
    const result = spawnSync(argv[0] as string, argv.slice(1), {
      cwd: home.dir, encoding: 'utf8', timeout: 90_000, env: { PATH: `${syncauthOnPath(tempDir('syncauth-bin-'))}:/usr/bin:/bin`, HOME: home.dir },
    });
    expect(result.status, `${result.stdout}\n${result.stderr}`).toBe(0);
  }, 100_000);

  for (const block of blocks) {
    const runnable = block.commands.filter((c) => NOT_RUN[c.key] === undefined);
    const title = `${block.file}:${block.line} (${block.heading.replace(/^#+ /, '')}): ${runnable.length} of ${block.commands.length} run`;
    if (runnable.length === 0) {
      it.skip(`${title}: ${block.commands.map((c) => NOT_RUN[c.key]).join('; ')}`, () => {});
      continue;
    }
    it.concurrent(title, async () => {
      // The block showing setup starts with no profile; the others with `default` and `docs` set up.
      const world = await makeWorld(!runnable.some((c) => /\bsyncauth setup\b/.test(c.key)));
      worlds.push(world);
      for (const command of block.commands) {
        if (NOT_RUN[command.key] !== undefined) continue;
        const how = HOW[command.key] ?? {};
        const result = await runCommand(command, how, world);
        expect(result.code, `${block.file}:${command.line}: ${command.text}\nstdout:\n${result.stdout}\nstderr:\n${result.stderr}`).toBe(how.code ?? 0);
        expect(nodeWarnings(result.stderr), `${command.text}: Node's own warnings`).toEqual([]);
        await how.check?.({ result, world });
      }
    }, 120_000);
  }
});
