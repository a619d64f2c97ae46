// Bad input to `syncauth setup`: exit 2, a message naming the field, and nothing done — no file in the config
// dir, and not one request to the emulator (not even to the token endpoint). Each case runs against its own
// emulator and HOME, so cases can run side by side and a stray request is pinned on the case that made it.
import { afterAll, describe, expect, it } from 'vitest';
import {
  approveLikeABrowser, dirsUnder, filesUnder, newHome, onboardingEnv, runCli, spawnCli, startOnboarding, AUTHORIZE_URL_PATTERN, type Onboarding,
} from '../helpers/onboarding.js';

const WORKFLOW = '6f1c2d7e-2b1a-4c3d-9e8f-0a1b2c3d4e5f';
// If a case got past validation it would wait for the browser; a short timeout makes such a failure quick.
const BASE_ARGS = ['setup', '--yes', '--no-open', '--timeout', '5'];
const FLAG_CANARY = 'canaryFlagValue7Q2Z';

interface Case {
  name: string;
  args?: string[];
  /** Changes to the complete, valid environment (undefined removes a variable). */
  env?: Record<string, string | undefined>;
  message: RegExp;
}

const cases: Case[] = [
  // the service's base URL
  { name: 'base URL without a scheme', env: { SYNCAUTH_BASE_URL: 'platform.example.com' }, message: /SYNCAUTH_BASE_URL: must be an absolute http\(s\) URL/ },
  { name: 'base URL with another scheme', args: ['--base-url', 'ftp://platform.example.com'], message: /--base-url: must be an http\(s\) URL/ },
  { name: 'base URL with credentials', args: ['--base-url', `https://admin:${FLAG_CANARY}@platform.example.com`], message: /--base-url: must not carry credentials in the URL/ },
  { name: 'base URL with a query', args: ['--base-url', 'https://platform.example.com/?key=1'], message: /--base-url or SYNCAUTH_BASE_URL: must not contain a query or a fragment/ },
  { name: 'base URL with a fragment', args: ['--base-url', 'https://platform.example.com/#api'], message: /--base-url or SYNCAUTH_BASE_URL: must not contain a query or a fragment/ },
  { name: 'base URL of blanks', args: ['--base-url', '   '], message: /--base-url: must be an absolute http\(s\) URL/ },
  // remote_url
  { name: 'remote URL naming the app-folder root', env: { SYNCAUTH_REMOTE_URL: 'dropbox://' }, message: /--remote-url or SYNCAUTH_REMOTE_URL: "dropbox:\/\/" names the app folder's root/ },
  { name: 'remote URL of the root with a slash', args: ['--remote-url', 'dropbox:///'], message: /--remote-url or SYNCAUTH_REMOTE_URL: .*names the app folder's root/ },
  { name: 'remote URL as a web link', args: ['--remote-url', 'https://www.dropbox.com/home/Apps/syncauth-demo/data'], message: /--remote-url or SYNCAUTH_REMOTE_URL: is a web link.*write dropbox:\/\/data/ },
  { name: 'remote URL with an s3 scheme', args: ['--remote-url', 's3://bucket/data'], message: /--remote-url or SYNCAUTH_REMOTE_URL: has the scheme s3:, but must start with dropbox:\/\// },
  { name: 'remote URL with an upper-case scheme', args: ['--remote-url', 'Dropbox://data'], message: /--remote-url or SYNCAUTH_REMOTE_URL: the scheme must be lowercase: write dropbox:\/\/data/ },
  { name: 'remote URL without a scheme', args: ['--remote-url', 'data/reports'], message: /--remote-url or SYNCAUTH_REMOTE_URL: must start with dropbox:\/\/: write dropbox:\/\/data\/reports/ },
  { name: 'remote URL leaving the app folder', args: ['--remote-url', 'dropbox://../private'], message: /--remote-url or SYNCAUTH_REMOTE_URL: must not contain "\.\."/ },
  { name: 'remote URL with a backslash', args: ['--remote-url', 'dropbox://data\\reports'], message: /--remote-url or SYNCAUTH_REMOTE_URL: uses a backslash/ },
  // the workflow
  { name: 'workflow id that is not a UUID', args: ['--workflow-id', 'wf-1'], message: /--workflow-id or SYNCAUTH_WORKFLOW_ID: must be a UUID, got "wf-1"/ },
  { name: 'schedule without a workflow', args: ['--schedule', 'daily'], message: /--schedule or SYNCAUTH_SCHEDULE: a schedule needs a workflow to apply to/ },
  { name: 'unknown schedule (flag)', args: ['--workflow-id', WORKFLOW, '--schedule', 'hourly'], message: /--schedule: must be one of: every 15 minutes, .*monthly/ },
  { name: 'unknown schedule (env)', env: { SYNCAUTH_WORKFLOW_ID: WORKFLOW, SYNCAUTH_SCHEDULE: 'every 3 hours' }, message: /SYNCAUTH_SCHEDULE: must be one of: every 15 minutes/ },
  // access, store, profile, redirect URI
  { name: 'unknown access mode', args: ['--access', 'admin'], message: /--access: must be one of: read, write, read-write/ },
  { name: 'unknown access mode (env)', env: { SYNCAUTH_ACCESS: 'readonly' }, message: /SYNCAUTH_ACCESS: must be one of: read, write, read-write/ },
  { name: 'unknown store (flag)', args: ['--store', 'vault'], message: /--store: must be one of: keychain, file, env/ },
  { name: 'unknown store (env)', env: { SYNCAUTH_STORE: 'plaintext' }, message: /SYNCAUTH_STORE: must be one of: keychain, file, env/ },
  { name: 'file store without its key', env: { SYNCAUTH_STORE_KEY: undefined }, message: /SYNCAUTH_STORE=file needs SYNCAUTH_STORE_KEY/ },
  { name: 'env store without a refresh token', env: { SYNCAUTH_STORE: 'env' }, message: /SYNCAUTH_STORE: is env, which is read-only.*SYNCAUTH_REFRESH_TOKEN/ },
  { name: 'profile name with a path', args: ['--profile', '../etc'], message: /--profile: must be 1-64 letters, digits, dot, dash or underscore/ },
  { name: 'profile name starting with a dot', env: { SYNCAUTH_PROFILE: '.hidden' }, message: /SYNCAUTH_PROFILE: must be 1-64 letters/ },
  { name: 'profile name too long', args: ['--profile', 'p'.repeat(65)], message: /--profile: must be 1-64 letters/ },
  { name: 'redirect URI over https', args: ['--redirect-uri', 'https://127.0.0.1:53682/callback'], message: /--redirect-uri: must be an http loopback URL with an explicit port/ },
  { name: 'redirect URI on another host', args: ['--redirect-uri', 'http://example.com:53682/callback'], message: /--redirect-uri: must be an http loopback URL/ },
  { name: 'redirect URI without a port', args: ['--redirect-uri', 'http://127.0.0.1/callback'], message: /--redirect-uri: must be an http loopback URL with an explicit port/ },
  { name: 'redirect URI that is not a URL', env: { SYNCAUTH_REDIRECT_URI: 'localhost callback' }, message: /SYNCAUTH_REDIRECT_URI: must be a URL like http:\/\/127\.0\.0\.1:53682\/callback/ },
  // secrets as flags: refused before parsing, value never echoed
  { name: '--api-key as a flag', args: ['--api-key', FLAG_CANARY], message: /--api-key is refused: secrets are never taken from flags.*\n.*SYNCAUTH_API_KEY/ },
  { name: '--app-secret= as a flag', args: [`--app-secret=${FLAG_CANARY}`], message: /--app-secret is refused.*\n.*SYNCAUTH_APP_SECRET/ },
  { name: '--app-key as a flag', args: ['--app-key', FLAG_CANARY], message: /--app-key is refused.*\n.*SYNCAUTH_APP_KEY/ },
  { name: '--refresh-token= as a flag', args: [`--refresh-token=${FLAG_CANARY}`], message: /--refresh-token is refused.*\n.*SYNCAUTH_REFRESH_TOKEN/ },
  { name: '--store-key as a flag', args: ['--store-key', FLAG_CANARY], message: /--store-key is refused.*\n.*SYNCAUTH_STORE_KEY/ },
  { name: '--api-key= after valid flags', args: ['--json', `--api-key=${FLAG_CANARY}`], message: /--api-key is refused/ },
  // required settings missing with --yes
  { name: 'no base URL', env: { SYNCAUTH_BASE_URL: undefined }, message: /--base-url or SYNCAUTH_BASE_URL: is required/ },
  { name: 'no API key', env: { SYNCAUTH_API_KEY: undefined }, message: /SYNCAUTH_API_KEY: is required \(secrets come from the environment, a \.env file or a prompt, never from flags\)/ },
  { name: 'no app key', env: { SYNCAUTH_APP_KEY: undefined }, message: /SYNCAUTH_APP_KEY: is required/ },
  { name: 'no app secret', env: { SYNCAUTH_APP_SECRET: undefined }, message: /SYNCAUTH_APP_SECRET: is required/ },
  { name: 'no remote URL', env: { SYNCAUTH_REMOTE_URL: undefined }, message: /--remote-url or SYNCAUTH_REMOTE_URL: is required/ },
  { name: 'nothing at all', env: { SYNCAUTH_BASE_URL: undefined, SYNCAUTH_API_KEY: undefined, SYNCAUTH_APP_KEY: undefined, SYNCAUTH_APP_SECRET: undefined, SYNCAUTH_REMOTE_URL: undefined }, message: /invalid input:(\n {2}- .*is required.*){5}/ },
  // malformed secrets: refused before the browser opens, without echoing them
  { name: 'API key with a space', env: { SYNCAUTH_API_KEY: `key ${FLAG_CANARY}` }, message: /SYNCAUTH_API_KEY: contains spaces or characters not allowed in an HTTP header/ },
  { name: 'app key with a colon', env: { SYNCAUTH_APP_KEY: `abc:${FLAG_CANARY}` }, message: /SYNCAUTH_APP_KEY: contains ":"/ },
  { name: 'app secret with a space', env: { SYNCAUTH_APP_SECRET: `s ${FLAG_CANARY}` }, message: /SYNCAUTH_APP_SECRET: contains spaces or characters a Dropbox credential never has/ },
  { name: 'refresh token with a line break', env: { SYNCAUTH_REFRESH_TOKEN: `abc\n${FLAG_CANARY}` }, message: /SYNCAUTH_REFRESH_TOKEN: contains spaces or characters a Dropbox credential never has/ },
  // --timeout, the renewal margin, and the other settings
  { name: 'timeout of zero', args: ['--timeout', '0'], message: /--timeout: must be whole seconds, at least 1/ },
  { name: 'timeout that is not a number', args: ['--timeout', 'soon'], message: /--timeout: must be whole seconds/ },
  { name: 'fractional timeout', args: ['--timeout', '1.5'], message: /--timeout: must be whole seconds/ },
  { name: 'renew margin of zero', env: { SYNCAUTH_RENEW_MARGIN: '0' }, message: /SYNCAUTH_RENEW_MARGIN: must be a whole number from 1 to 14399/ },
  { name: 'renew margin with a unit', env: { SYNCAUTH_RENEW_MARGIN: '15m' }, message: /SYNCAUTH_RENEW_MARGIN: must be a whole number from 1 to 14399/ },
  { name: 'renew margin beyond the token lifetime', env: { SYNCAUTH_RENEW_MARGIN: '14400' }, message: /SYNCAUTH_RENEW_MARGIN: must be a whole number from 1 to 14399/ },
  { name: 'recursive that is not a boolean', env: { SYNCAUTH_RECURSIVE: 'maybe' }, message: /SYNCAUTH_RECURSIVE: must be true or false/ },
  { name: 'API key header with a space', args: ['--api-key-header', 'service api key'], message: /--api-key-header: must be a valid HTTP header name/ },
  { name: 'token URL with another scheme', args: ['--token-url', 'ftp://api.dropboxapi.com/oauth2/token'], message: /--token-url: must be an http\(s\) URL/ },
  { name: 'authorize URL without a scheme', env: { SYNCAUTH_AUTHORIZE_URL: 'www.dropbox.com/oauth2/authorize' }, message: /SYNCAUTH_AUTHORIZE_URL: must be an absolute http\(s\) URL/ },
  { name: 'Dropbox API URL with credentials', args: ['--dropbox-api-url', `https://u:${FLAG_CANARY}@api.dropboxapi.com`], message: /--dropbox-api-url: must not carry credentials/ },
  { name: 'blank connector name', args: ['--connector-name', '  '], message: /--connector-name: must not be empty/ },
  { name: 'several problems at once', args: ['--workflow-id', 'x', '--remote-url', 'dropbox://'], message: /invalid input:\n {2}- --remote-url or SYNCAUTH_REMOTE_URL: .*\n {2}- --workflow-id or SYNCAUTH_WORKFLOW_ID: must be a UUID/ },
  { name: 'unknown option', args: ['--colour'], message: /unknown option '--colour'/ },
];

const emulators: Onboarding[] = [];
afterAll(async () => {
  await Promise.all(emulators.map((ob) => ob.emulator.close()));
});

describe('setup refuses bad input with exit 2, naming the field, and does nothing', () => {
  it('covers at least 30 cases', () => {
    expect(cases.length).toBeGreaterThanOrEqual(30);
  });

  it('the environment the cases start from is complete and valid: setup gets to the browser and succeeds', async () => {
    const ob = await startOnboarding();
    emulators.push(ob);
    const home = newHome();
    const proc = spawnCli(BASE_ARGS, { env: onboardingEnv(ob, home), cwd: home.dir, stdin: '' });
    await approveLikeABrowser(await proc.waitForStderr(AUTHORIZE_URL_PATTERN));
    const result = await proc.result;
    expect(result.stderr).not.toMatch(/^error/m);
    expect(result.code).toBe(0);
    expect(filesUnder(home.configDir).length).toBeGreaterThan(0);
  });

  it.concurrent.each(cases)('$name', async (c) => {
    const ob = await startOnboarding();
    emulators.push(ob);
    const home = newHome();
    const result = await runCli([...BASE_ARGS, ...(c.args ?? [])], { env: onboardingEnv(ob, home, c.env), cwd: home.dir });
    expect(result.stderr).toMatch(c.message);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).not.toMatch(/oauth2\/authorize/);
    expect(result.stderr).not.toContain(FLAG_CANARY);
    // Nothing written: not a file, not even the config dir's profiles folder.
    expect(filesUnder(home.configDir)).toEqual([]);
    expect(dirsUnder(home.configDir).filter((d) => d !== home.configDir)).toEqual([]);
    expect(ob.emulator.state.requests).toEqual([]);
    expect(ob.emulator.state.codes.size + ob.emulator.state.grants.size).toBe(0);
  });
});
