// Ctrl-C and SIGTERM sent to real processes: the built CLI in each phase of `setup`, `authorize` and `refresh`
// (the browser wait, the paste prompt, a token exchange or a service call that never answers), and the
// policy of src/cli/interrupt.ts itself (second signal, deadline, write sections) in a small script. The
// bounds are generous: they check behaviour (the process ends, promptly), not speed.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, ROOT, type CliResult } from '../helpers/cli.js';
import {
  AUTHORIZE_URL_PATTERN, approveLikeABrowser, filesUnder, grantRefreshToken, newHome, onboardingEnv, readProfileState, runCli, sources, spawnCli,
  startOnboarding, storedSecrets, type CliProcess, type Home, type Onboarding,
} from '../helpers/onboarding.js';
import { hang, misbehavingServer, type MisbehavingServer } from '../helpers/servers.js';
import { waitFor } from '../helpers/wait.js';

// A first signal ends a command within 5 s; the slack covers a loaded machine.
const FIRST_SIGNAL_BOUND_S = 8;
const STACK_FRAME = /^\s+at .+:\d+:\d+\)?$/m;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Sends `signal` and waits for the process to end; `seconds` is the time from the signal to the exit. */
async function signalAndWait(proc: Pick<CliProcess, 'pid' | 'result'>, signal: NodeJS.Signals = 'SIGINT'): Promise<CliResult & { seconds: number }> {
  const sentAt = Date.now();
  process.kill(proc.pid, signal);
  const result = await proc.result;
  return { ...result, seconds: (Date.now() - sentAt) / 1000 };
}

function expectQuietInterruption(result: CliResult & { seconds: number }, code = 130): void {
  expect(result.stderr).not.toMatch(STACK_FRAME);
  expect(result.stderr).not.toMatch(/unexpected failure/);
  expect(result.code).toBe(code);
  expect(result.seconds).toBeLessThan(FIRST_SIGNAL_BOUND_S);
}

let ob: Onboarding;
/** Takes requests and never answers them: a hung Dropbox or service. */
let hanging: MisbehavingServer;

beforeAll(async () => {
  ob = await startOnboarding();
  hanging = await misbehavingServer(hang);
});
afterAll(async () => {
  await ob.emulator.close();
});

function setupEnv(home: Home, extra: Record<string, string | undefined> = {}) {
  return onboardingEnv(ob, home, { SYNCAUTH_PROFILE: 'docs', ...extra });
}

describe('a first Ctrl-C ends the command within 5 s, whatever it waits for', () => {
  it('setup, waiting for the browser to come back: exit 130, nothing written', async () => {
    const home = newHome();
    const proc = spawnCli(['setup', '--yes', '--no-open'], { env: setupEnv(home), cwd: home.dir });
    await proc.waitForStderr(/Waiting for Dropbox to send the browser back/);
    const result = await signalAndWait(proc);
    expectQuietInterruption(result);
    expect(result.stderr).toMatch(/interrupted/);
    expect(filesUnder(home.configDir)).toEqual([]);
  });

  it('setup --no-browser, at the paste prompt with stdin left open: exit 130, nothing written', async () => {
    const home = newHome();
    const proc = spawnCli(['setup', '--yes', '--no-browser'], { env: setupEnv(home), cwd: home.dir });
    await proc.waitForStderr(/Paste it here/);
    const result = await signalAndWait(proc);
    expectQuietInterruption(result);
    expect(filesUnder(home.configDir)).toEqual([]);
  });

  it('authorize, waiting for the browser, on SIGTERM: exit 143, no token printed', async () => {
    const home = newHome();
    const proc = spawnCli(['authorize', '--no-open'], { env: setupEnv(home), cwd: home.dir });
    await proc.waitForStderr(/Waiting for Dropbox to send the browser back/);
    const result = await signalAndWait(proc, 'SIGTERM');
    expectQuietInterruption(result, 143);
    expect(result.stdout).toBe('');
  });

  it('setup, while Dropbox\'s token endpoint never answers the code exchange: exit 130, nothing written', async () => {
    const home = newHome();
    const proc = spawnCli(['setup', '--yes', '--no-open'], { env: setupEnv(home, { SYNCAUTH_TOKEN_URL: `${hanging.url}/exchange/oauth2/token` }), cwd: home.dir });
    // The browser's callback page waits for the outcome of the exchange, which never comes: it is not awaited.
    const browser = approveLikeABrowser(await proc.waitForStderr(AUTHORIZE_URL_PATTERN)).catch(() => undefined);
    await hanging.arrived('/exchange/');
    const result = await signalAndWait(proc);
    await browser;
    expectQuietInterruption(result);
    expect(filesUnder(home.configDir)).toEqual([]);
  });

  it('setup, while the service never answers: exit 130, the grant kept with state saying setup is unfinished, which refresh completes', async () => {
    const home = newHome();
    try {
      const proc = spawnCli(['setup', '--yes', '--no-open', '--connector-name', 'hung-service'], { env: setupEnv(home), cwd: home.dir });
      const url = await proc.waitForStderr(AUTHORIZE_URL_PATTERN);
      // The service's first answer after the browser step (its checks before are done) is held back for a
      // minute; the request is under way once the state exists.
      ob.emulator.setFaults([{ route: 'sources', latencyMs: 60_000, times: 1 }]);
      await approveLikeABrowser(url);
      await waitFor('the state written before the service is asked', () => readProfileState(home, 'docs'), 15_000);
      await sleep(200);
      const result = await signalAndWait(proc);
      expectQuietInterruption(result);
      // The command as this run was started (node and the script; setup-next-command.test.ts has the others).
      expect(result.stderr).toContain(`hint: the grant is stored; run \`node ${CLI} refresh --profile docs\` to finish`);
      // Never secrets without the state that names them.
      expect((await storedSecrets(home, 'docs')).refresh_token).toBeTruthy();
      expect(readProfileState(home, 'docs')).toMatchObject({
        profile: 'docs', connectorName: 'hung-service', lastError: { code: 'SYNCAUTH_SETUP_UNFINISHED', terminal: false },
      });
      expect(filesUnder(home.configDir).map((f) => path.relative(home.configDir, f)).filter((f) => f !== 'secrets/docs.token')).toEqual(['profiles/docs.json', 'secrets.enc', 'secrets/docs.enc']);
    } finally {
      ob.emulator.setFaults([]);
    }

    const refreshed = await runCli(['refresh'], {
      env: { SYNCAUTH_CONFIG_DIR: home.configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: home.storeKey, SYNCAUTH_PROFILE: 'docs' }, cwd: home.dir,
    });
    expect(refreshed.stderr).not.toMatch(/^error/m);
    expect(refreshed.code).toBe(0);
    const state = readProfileState(home, 'docs');
    expect(state?.lastError).toBeUndefined();
    expect(sources(ob).filter((s) => s.name === 'hung-service').map((s) => s.id)).toEqual([state?.connectorId]);
  });

  it('refresh, while the service never answers: exit 130 at once', async () => {
    const home = newHome();
    const env = setupEnv(home, {
      SYNCAUTH_STORE: 'env', SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob), SYNCAUTH_BASE_URL: `${hanging.url}/refresh-service`,
    });
    const proc = spawnCli(['refresh'], { env, cwd: home.dir });
    await hanging.arrived('/refresh-service/');
    const result = await signalAndWait(proc);
    expectQuietInterruption(result);
    expect(result.seconds).toBeLessThan(2);
  });
});

// The policy on its own: a script that installs the handler from the build and then waits in a way that
// ignores the signal, or writes in a write section.
const INTERRUPT_MODULE = pathToFileURL(path.join(ROOT, 'dist/cli/interrupt.js')).href;

function runScript(body: string): Pick<CliProcess, 'pid' | 'result' | 'waitForStderr'> {
  const script = `const { handleSignals, writeSection } = await import(${JSON.stringify(INTERRUPT_MODULE)});\n${body}`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
  const listeners = new Set<() => void>();
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
    for (const listener of listeners) listener();
  });
  let exited = false;
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const result = new Promise<CliResult>((resolve) => child.on('close', (code) => {
    exited = true;
    clearTimeout(timer);
    for (const listener of listeners) listener();
    resolve({ code, stdout, stderr });
  }));
  return {
    pid: child.pid as number,
    result,
    waitForStderr: (pattern) => new Promise((resolve, reject) => {
      const check = () => {
        const match = pattern.exec(stderr);
        if (match || exited) listeners.delete(check);
        if (match) resolve(match[0]);
        else if (exited) reject(new Error(`the script exited before printing ${pattern}; stderr:\n${stderr}`));
      };
      listeners.add(check);
      check();
    }),
  };
}

describe('the signal policy, on a real process', () => {
  it('a command that does not unwind is ended by the deadline, with 130, within 5 s', async () => {
    const proc = runScript("handleSignals('unwind'); setInterval(() => undefined, 1000); process.stderr.write('ready\\n');");
    await proc.waitForStderr(/ready/);
    const result = await signalAndWait(proc);
    expect(result.code).toBe(130);
    expect(result.seconds).toBeGreaterThan(3);
    expect(result.seconds).toBeLessThan(FIRST_SIGNAL_BOUND_S);
    expect(result.stderr).toMatch(/Ctrl-C again to stop at once/);
  });

  it('a second Ctrl-C ends it at once', async () => {
    const proc = runScript("handleSignals('unwind'); setInterval(() => undefined, 1000); process.stderr.write('ready\\n');");
    await proc.waitForStderr(/ready/);
    process.kill(proc.pid, 'SIGINT');
    await proc.waitForStderr(/interrupted/);
    const result = await signalAndWait(proc);
    expect(result.code).toBe(130);
    expect(result.seconds).toBeLessThan(2);
  });

  it('SIGTERM exits 143', async () => {
    const proc = runScript("handleSignals('exit'); setInterval(() => undefined, 1000); process.stderr.write('ready\\n');");
    await proc.waitForStderr(/ready/);
    const result = await signalAndWait(proc, 'SIGTERM');
    expect(result.code).toBe(143);
    expect(result.seconds).toBeLessThan(2);
  });

  it('neither signal cuts a write section: the exit waits for it to finish, and nothing after it runs', async () => {
    const proc = runScript(`
      handleSignals('unwind');
      setInterval(() => undefined, 1000);
      await writeSection(async () => {
        process.stderr.write('writing\\n');
        await new Promise((resolve) => setTimeout(resolve, 1500));
        process.stderr.write('written\\n');
      });
      process.stderr.write('after the write section\\n');
    `);
    await proc.waitForStderr(/writing/);
    process.kill(proc.pid, 'SIGINT');
    await sleep(100);
    const result = await signalAndWait(proc);
    expect(result.code).toBe(130);
    expect(result.stderr).toMatch(/written/);
    expect(result.stderr).not.toMatch(/after the write section/);
    expect(result.seconds).toBeLessThan(FIRST_SIGNAL_BOUND_S);
  });

  it("the first signal in 'exit' mode ends the process at once, after the open write section", async () => {
    const proc = runScript(`
      handleSignals('exit');
      setInterval(() => undefined, 1000);
      await writeSection(async () => {
        process.stderr.write('writing\\n');
        await new Promise((resolve) => setTimeout(resolve, 1000));
        process.stderr.write('written\\n');
      });
      process.stderr.write('after the write section\\n');
    `);
    await proc.waitForStderr(/writing/);
    const result = await signalAndWait(proc);
    expect(result.code).toBe(130);
    expect(result.stderr).toMatch(/written/);
    expect(result.stderr).not.toMatch(/after the write section/);
    expect(result.seconds).toBeLessThan(3);
  });
});
