// The secrets never leak: a whole onboarding (setup, authorize, token, status, refresh, logout) runs with
// canary values — the service API key, the Dropbox app key and secret, the store key, and the refresh and
// access tokens the emulator hands out — and none of them may turn up in the commands' output, in a file other
// than the encrypted store (and not in plaintext there either), in any process's argv, or in the emulator's
// request log. The only places they belong are `token`'s stdout (the access token) and `authorize`'s stdout
// (the refresh token), and the printed authorize URL, which must carry the app key as `client_id`. Every
// search covers the forms a secret takes on the wire too: percent- and form-encoded, and the app key and secret
// as an HTTP Basic credential. A stand-in token endpoint that echoes every credential back in its error answer
// shows that what a provider says is redacted before it reaches stderr or the profile state.
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CliResult } from '../helpers/cli.js';
import {
  dirsUnder, filesUnder, modeOf, newestAccessToken, newestRefreshToken, newHome, onboardingEnv, runCli, runWithApproval, spawnedArgv,
  startOnboarding, storedSecrets, type CliProcess, type Home, type Onboarding,
} from '../helpers/onboarding.js';

const tag = () => randomBytes(6).toString('hex');
// Characters that URL and form encoding change, so that the encoded forms differ from the raw ones.
const API_KEY = `canaryApiKey/${tag()}+k`;
const APP_KEY = `canaryAppKey${tag()}`;
const APP_SECRET = `canaryAppSecret+${tag()}/s=`;
const form = (value: string) => new URLSearchParams({ v: value }).toString().slice(2);
const basic = (key: string, secret: string) => Buffer.from(`${key}:${secret}`).toString('base64');

let ob: Onboarding;
let home: Home;
const outputs: { command: string; result: CliResult }[] = [];
const procSnapshots: { pid: number; own: string; all: string[] }[] = [];
const fileScans: { after: string; files: Record<string, string>; modes: Record<string, string> }[] = [];

/** Every secret the run has produced so far, by a name for the report. */
function canaries(): Record<string, string> {
  const found: Record<string, string> = { 'service API key': API_KEY, 'app key': APP_KEY, 'app secret': APP_SECRET, 'store key': home.storeKey };
  for (const grant of ob.emulator.state.grants.values()) if (grant.refreshToken) found[`refresh token ${grant.id}`] = grant.refreshToken;
  for (const token of ob.emulator.state.accessTokens.keys()) found[`access token …${token.slice(-6)}`] = token;
  return found;
}

/** The names of the canaries that occur in `text`, as they are or in a form they take on the wire. */
function leaks(text: string, except: string[] = []): string[] {
  const found = Object.entries(canaries())
    .filter(([, value]) => !except.includes(value))
    .filter(([, value]) => [value, encodeURIComponent(value), form(value)].some((spelling) => text.includes(spelling)))
    .map(([name]) => name);
  for (const credential of [basic(APP_KEY, APP_SECRET), basic(APP_KEY, form(APP_SECRET))]) {
    if (text.includes(credential)) found.push('app key and secret as HTTP Basic');
  }
  return found;
}

function commandLines(): string[] {
  const lines: string[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      lines.push(readFileSync(path.join('/proc', entry, 'cmdline'), 'utf8').replaceAll('\0', ' '));
    } catch {
      // The process ended while we looked.
    }
  }
  return lines;
}

function snapshotFiles(after: string): void {
  const files: Record<string, string> = {};
  const modes: Record<string, string> = {};
  for (const file of filesUnder(home.dir)) {
    files[path.relative(home.dir, file)] = readFileSync(file, 'latin1');
    modes[path.relative(home.dir, file)] = modeOf(file).toString(8);
  }
  for (const dir of dirsUnder(home.configDir)) modes[`${path.relative(home.dir, dir)}/`] = modeOf(dir).toString(8);
  fileScans.push({ after, files, modes });
}

async function step(command: string, work: () => Promise<CliResult>): Promise<CliResult> {
  const result = await work();
  outputs.push({ command, result });
  snapshotFiles(command);
  if (result.code !== 0) throw new Error(`${command} exited ${result.code}:\n${result.stderr}`);
  return result;
}

const storeEnv = () => ({ SYNCAUTH_CONFIG_DIR: home.configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: home.storeKey, SYNCAUTH_PROFILE: 'canary' });

let setupResult: CliResult & { authorizeUrl: string };
let authorizeResult: CliResult & { authorizeUrl: string };
let tokenResult: CliResult;
let storedAfterSetup: Record<string, string | undefined>;
let accessTokenAfterSetup: string;
let accessTokenOfTokenRun: string;

beforeAll(async () => {
  ob = await startOnboarding({ app: { appKey: APP_KEY, appSecret: APP_SECRET }, apiKey: API_KEY });
  home = newHome();
  const workflowId = ob.emulator.seeded?.workflowId as string;
  const fullEnv = onboardingEnv(ob, home, { SYNCAUTH_PROFILE: 'canary', SYNCAUTH_WORKFLOW_ID: workflowId, SYNCAUTH_SCHEDULE: 'every 4 hours' });

  setupResult = (await step('setup', () => runWithApproval(['setup', '--yes', '--no-open'], {
    env: fullEnv, cwd: home.dir,
    // While setup waits for the browser, look at its argv and at every process's.
    onWaiting: (proc: CliProcess) => {
      procSnapshots.push({ pid: proc.pid, own: readFileSync(`/proc/${proc.pid}/cmdline`, 'utf8').replaceAll('\0', ' '), all: commandLines() });
    },
  }))) as CliResult & { authorizeUrl: string };
  storedAfterSetup = { ...(await storedSecrets(home, 'canary')) };

  const { SYNCAUTH_APP_KEY, SYNCAUTH_APP_SECRET, SYNCAUTH_AUTHORIZE_URL, SYNCAUTH_TOKEN_URL, SYNCAUTH_REDIRECT_URI } = fullEnv;
  authorizeResult = (await step('authorize', () => runWithApproval(['authorize', '--no-open'], {
    env: { SYNCAUTH_CONFIG_DIR: home.configDir, SYNCAUTH_APP_KEY, SYNCAUTH_APP_SECRET, SYNCAUTH_AUTHORIZE_URL, SYNCAUTH_TOKEN_URL, SYNCAUTH_REDIRECT_URI },
    cwd: home.dir,
  }))) as CliResult & { authorizeUrl: string };

  accessTokenAfterSetup = newestAccessToken(ob);
  tokenResult = await step('token', () => runCli(['token'], { env: storeEnv(), cwd: home.dir }));
  accessTokenOfTokenRun = newestAccessToken(ob);
  await step('status', () => runCli(['status'], { env: storeEnv(), cwd: home.dir }));
  await step('status --json', () => runCli(['status', '--json'], { env: storeEnv(), cwd: home.dir }));
  await step('refresh', () => runCli(['refresh'], { env: storeEnv(), cwd: home.dir }));
  await step('refresh --json', () => runCli(['refresh', '--json'], { env: storeEnv(), cwd: home.dir }));
  await step('logout', () => runCli(['logout'], { env: storeEnv(), cwd: home.dir }));
});
afterAll(async () => ob?.emulator.close());

describe('canary secrets never leak', () => {
  it('the run used the canaries: the store held them, the emulator saw them, the scan finds them where they belong', () => {
    expect(storedAfterSetup).toEqual({ api_key: API_KEY, app_key: APP_KEY, app_secret: APP_SECRET, refresh_token: expect.any(String) });
    expect(ob.emulator.state.grants.size).toBe(2);
    // Two exchanges (setup, authorize) and the renewal of `token`; the refreshes right after it reuse that one.
    expect(ob.emulator.state.accessTokens.size).toBeGreaterThanOrEqual(3);
    expect(ob.emulator.state.requests.length).toBeGreaterThan(10);
    expect(outputs.map((o) => o.command)).toEqual(['setup', 'authorize', 'token', 'status', 'status --json', 'refresh', 'refresh --json', 'logout']);
    // The scanner does see a secret when one is there.
    expect(leaks(tokenResult.stdout)).toHaveLength(1);
    expect(leaks(`x${API_KEY}x`)).toEqual(['service API key']);
  });

  it("token's stdout is exactly the access token, authorize's exactly the new refresh token", () => {
    const setupRefreshToken = storedAfterSetup.refresh_token as string;
    const authorizeRefreshToken = newestRefreshToken(ob);
    expect(authorizeRefreshToken).not.toBe(setupRefreshToken);
    expect(authorizeResult.stdout).toBe(`${authorizeRefreshToken}\n`);
    const accessToken = tokenResult.stdout.trimEnd();
    // The token `token` itself got from the emulator, not an older one replayed.
    expect(tokenResult.stdout).toBe(`${accessTokenOfTokenRun}\n`);
    expect(accessTokenOfTokenRun).not.toBe(accessTokenAfterSetup);
    expect(leaks(tokenResult.stdout, [accessToken])).toEqual([]);
    expect(leaks(authorizeResult.stdout, [authorizeRefreshToken])).toEqual([]);
  });

  it('no stdout or stderr holds a secret (the authorize URL carries the app key as client_id, and only that)', () => {
    for (const authorizeUrl of [setupResult.authorizeUrl, authorizeResult.authorizeUrl]) {
      const url = new URL(authorizeUrl);
      expect(url.searchParams.get('client_id')).toBe(APP_KEY);
      url.searchParams.delete('client_id');
      expect(leaks(url.toString())).toEqual([]);
    }
    for (const { command, result } of outputs) {
      const stdout = command === 'token' || command === 'authorize' ? '' : result.stdout;
      const urls = [setupResult.authorizeUrl, authorizeResult.authorizeUrl];
      const stderr = urls.reduce((text, url) => text.split(url).join('<authorize URL>'), result.stderr);
      expect({ command, stdout: leaks(stdout), stderr: leaks(stderr) }).toEqual({ command, stdout: [], stderr: [] });
    }
  });

  it('no file but the encrypted store holds a secret, and the store holds none in plaintext', () => {
    expect(fileScans.length).toBe(outputs.length);
    expect(Object.keys(fileScans[0]?.files ?? {}).sort()).toEqual(['config/config.json', 'config/profiles/canary.json', 'config/secrets.enc', 'config/secrets/canary.enc']);
    for (const { after, files } of fileScans) {
      for (const [name, content] of Object.entries(files)) {
        expect({ after, name, leaks: leaks(content) }).toEqual({ after, name, leaks: [] });
        if (name.startsWith('config/secrets')) {
          // The keyring wraps a key; a profile's files hold data.
          const envelope = JSON.parse(content) as { data?: string; key?: string; cipher: { name: string } };
          expect(envelope.cipher.name).toBe('aes-256-gcm');
          expect({ after, decoded: leaks(Buffer.from(envelope.data ?? envelope.key ?? '', 'base64').toString('latin1')) }).toEqual({ after, decoded: [] });
        }
      }
    }
  });

  it('no process had a secret in its argv, not even while setup waited for the browser', () => {
    expect(spawnedArgv.length).toBe(outputs.length);
    for (const argv of spawnedArgv) expect(leaks(argv.join(' '))).toEqual([]);
    expect(procSnapshots).toHaveLength(1);
    const [snapshot] = procSnapshots;
    expect(snapshot?.own).toContain('setup --yes --no-open');
    expect(leaks(snapshot?.own ?? 'missing')).toEqual([]);
    expect(snapshot?.all.some((line) => line.includes('dist/cli/main.js setup'))).toBe(true);
    expect(snapshot?.all.flatMap((line) => leaks(line))).toEqual([]);
  });

  it("the emulator's request log holds no secret", () => {
    expect(leaks(JSON.stringify(ob.emulator.state.requests))).toEqual([]);
  });

  it('after every command, the config dir and every directory in it are 0700, every file 0600', () => {
    expect(fileScans[0]?.modes).toEqual({
      'config/': '700', 'config/config.json': '600', 'config/profiles/': '700', 'config/profiles/canary.json': '600', 'config/secrets.enc': '600',
      'config/secrets/': '700', 'config/secrets/canary.enc': '600',
    });
    for (const { after, modes } of fileScans) {
      for (const [name, mode] of Object.entries(modes)) expect({ after, name, mode }).toEqual({ after, name, mode: name.endsWith('/') ? '700' : '600' });
    }
  });
});

describe('a token endpoint that echoes the credentials back', () => {
  let echo: Server;
  let echoUrl: string;
  let echoHome: Home;
  const REFRESH_TOKEN = `canaryRefresh+${tag()}/r`;

  beforeAll(async () => {
    // Answers every request as a careless provider might: the Authorization header and the form, as received.
    echo = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => { body += chunk.toString(); });
      req.on('end', () => {
        const said = `${req.headers.authorization ?? 'no authorization'} ${body} (client ${APP_KEY})`;
        res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'invalid_client', error_description: said }));
      });
    });
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
    echoUrl = `http://127.0.0.1:${(echo.address() as { port: number }).port}/oauth2/token`;
    echoHome = newHome();
  });
  afterAll(async () => new Promise((resolve) => echo?.close(resolve)));

  const echoLeaks = (text: string): string[] => {
    const found = leaks(text);
    if ([REFRESH_TOKEN, form(REFRESH_TOKEN)].some((spelling) => text.includes(spelling))) found.push('refresh token');
    return found;
  };

  it('a renewal: neither stderr nor the state (lastError included) carries any credential, the app key neither', async () => {
    const env = {
      SYNCAUTH_CONFIG_DIR: echoHome.configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: echoHome.storeKey, SYNCAUTH_PROFILE: 'echo',
      SYNCAUTH_APP_KEY: APP_KEY, SYNCAUTH_APP_SECRET: APP_SECRET, SYNCAUTH_REFRESH_TOKEN: REFRESH_TOKEN, SYNCAUTH_API_KEY: API_KEY, SYNCAUTH_TOKEN_URL: echoUrl,
    };
    const result = await runCli(['token'], { env, cwd: echoHome.dir });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('invalid_client');
    expect(result.stderr).toContain('[redacted]');
    expect({ stdout: echoLeaks(result.stdout), stderr: echoLeaks(result.stderr) }).toEqual({ stdout: [], stderr: [] });
    const state = readFileSync(path.join(echoHome.configDir, 'profiles', 'echo.json'), 'utf8');
    expect(state).toContain('"lastError"');
    expect(state).toContain('[redacted]');
    expect(echoLeaks(state)).toEqual([]);
  });

  it('a code exchange (HTTP Basic): stderr carries no credential', async () => {
    const env = { ...onboardingEnv(ob, echoHome, { SYNCAUTH_PROFILE: 'echo-setup', SYNCAUTH_TOKEN_URL: echoUrl }), SYNCAUTH_APP_KEY: APP_KEY, SYNCAUTH_APP_SECRET: APP_SECRET, SYNCAUTH_API_KEY: API_KEY };
    const result = await runCli(['setup', '--yes', '--no-browser'], { env, cwd: echoHome.dir, stdin: 'pasted-code-0123456789\n' });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('invalid_client');
    const printedUrl = /\s(http:\/\/127\.0\.0\.1:\d+\/oauth2\/authorize\?\S+)/.exec(result.stderr)?.[1] ?? '';
    expect(echoLeaks(result.stderr.split(printedUrl).join('<authorize URL>'))).toEqual([]);
    expect(result.stderr).toContain('[redacted]');
  });
});
