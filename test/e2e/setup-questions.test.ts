// The questions setup asks at a real terminal (tmux) about what it would change: a re-run's changes, taking over
// someone else's connector, and a keychain that cannot be reached on a headless host. No answers, nothing changes;
// yes, and the run goes on. What is typed in hidden prompts never shows on the screen.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_APP } from '../../src/emulator/index.js';
import { ServiceClient } from '../../src/service/client.js';
import { CLI, nodeWarnings } from '../helpers/cli.js';
import { isCI } from '../helpers/secret-service.js';
import {
  AUTHORIZE_URL_PATTERN, approveLikeABrowser, grantRefreshToken, newHome, onboardingEnv, profileFile, readProfileState, runCli, setupAnswers, startOnboarding, storedSecrets, type Home, type Onboarding,
} from '../helpers/onboarding.js';
import { waitFor } from '../helpers/wait.js';

const hasTmux = spawnSync('tmux', ['-V']).status === 0;
const tmuxNote = hasTmux ? '' : '[skipped: tmux is not installed; with CI set this fails instead] ';
const OTHER_APP = { appKey: 'questions4other', appSecret: 'questions9secret' };

let ob: Onboarding;
let client: ServiceClient;
beforeAll(async () => {
  ob = await startOnboarding({ extraApps: [{ ...DEFAULT_APP, ...OTHER_APP, name: 'another app' }] });
  client = new ServiceClient({ baseUrl: ob.emulator.url, apiKey: ob.apiKey });
});
afterAll(async () => {
  await client.close();
  await ob.emulator.close();
});

/** Runs `setup ARGS` in a private tmux server with `env`; `drive` answers the questions it sees on the screen. */
async function inTmux(home: Home, env: Record<string, string | undefined>, args: string[], drive: (t: Terminal) => Promise<void>): Promise<string> {
  const warningsFile = path.join(home.dir, 'node-warnings.txt');
  const socket = `syncauth-questions-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const tmux = (...a: string[]) => spawnSync('tmux', ['-L', socket, '-f', '/dev/null', ...a], {
    encoding: 'utf8',
    // The server hands this environment to the command: the secrets travel there, never in argv.
    // Node's warnings go to a file as well as can be seen: the prompts redraw over what was printed to stderr.
    env: { PATH: process.env.PATH, HOME: home.dir, TERM: 'xterm-256color', NODE_REDIRECT_WARNINGS: warningsFile, ...env },
  });
  const screen = () => tmux('capture-pane', '-p', '-J', '-S', '-200', '-t', 'q').stdout;
  const terminal: Terminal = {
    screen,
    see: (pattern) => waitFor(`${String(pattern)} on the screen`, () => (pattern.test(screen()) ? true : undefined), 20_000).then(() => undefined),
    type: (text) => {
      tmux('send-keys', '-t', 'q', '-l', text);
    },
    press: (key) => {
      tmux('send-keys', '-t', 'q', key);
    },
  };
  try {
    const started = tmux('new-session', '-d', '-s', 'q', '-x', '200', '-y', '50', '-c', home.dir,
      `${process.execPath} ${CLI} setup --no-check ${args.join(' ')}; echo "exit=$?"; sleep 60`);
    expect(started.status, started.stderr).toBe(0);
    await drive(terminal);
    const final = await waitFor('setup to end', () => {
      const text = screen();
      return /exit=\d+/.test(text) ? text : undefined;
    }, 30_000);
    // Node's own warnings (a listener leak, a deprecation) are not for the person at the terminal.
    expect(nodeWarnings(final), final).toEqual([]);
    expect(existsSync(warningsFile) ? readFileSync(warningsFile, 'utf8') : '').toBe('');
    return final;
  } finally {
    tmux('kill-server');
  }
}

interface Terminal {
  screen: () => string;
  see: (pattern: RegExp) => Promise<void>;
  type: (text: string) => void;
  press: (key: string) => void;
}

async function onboarded(name: string): Promise<Home> {
  const home = newHome();
  const result = await runCli(['setup', '--yes', '--no-check'], {
    env: onboardingEnv(ob, home, { SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob), SYNCAUTH_CONNECTOR_NAME: name }), cwd: home.dir,
  });
  expect(result.code, result.stderr).toBe(0);
  return home;
}

describe.skipIf(!hasTmux && !isCI())(`${tmuxNote}setup's questions at a terminal`, () => {
  it('first use with nothing set: every value asked, secrets hidden, then the browser round and the workflow question', async () => {
    const home = newHome();
    const full = onboardingEnv(ob, home, {});
    // Only where things live and which Dropbox to use; the person types the rest.
    const env = {
      SYNCAUTH_CONFIG_DIR: full.SYNCAUTH_CONFIG_DIR, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: home.storeKey,
      SYNCAUTH_AUTHORIZE_URL: full.SYNCAUTH_AUTHORIZE_URL, SYNCAUTH_TOKEN_URL: full.SYNCAUTH_TOKEN_URL,
      SYNCAUTH_DROPBOX_API_URL: full.SYNCAUTH_DROPBOX_API_URL, SYNCAUTH_REDIRECT_URI: full.SYNCAUTH_REDIRECT_URI,
      SYNCAUTH_CONNECTOR_NAME: 'asked-first-use',
    };
    const answers = setupAnswers(ob);
    const final = await inTmux(home, env, ['--no-open'], async (t) => {
      for (const [question, answer] of answers) {
        await t.see(question);
        t.type(answer);
        t.press('Enter');
      }
      await t.see(/Which workflow should read from the connector\?/);
      const count = (await client.listWorkflows()).length;
      for (let i = 0; i < count + 1; i += 1) t.press('Down');
      t.press('Enter');
      await t.see(AUTHORIZE_URL_PATTERN);
      await approveLikeABrowser(AUTHORIZE_URL_PATTERN.exec(t.screen())?.[1] as string);
    });
    expect(final, final).toContain('exit=0');
    for (const secret of [ob.apiKey, ob.app.appSecret, home.storeKey]) expect(final).not.toContain(secret);
    // The app key is part of the authorize URL (Dropbox's page needs it there); typed at its prompt, it was hidden.
    expect(final.replace(AUTHORIZE_URL_PATTERN, ' URL')).not.toContain(ob.app.appKey);
    const stored = await storedSecrets(home, 'default');
    expect(stored.api_key).toBe(ob.apiKey);
    expect(stored.app_secret).toBe(ob.app.appSecret);
    expect(readProfileState(home, 'default')?.baseUrl).toBe(ob.emulator.url);
  });

  it('the workflow question: an existing workflow with a schedule, wired to the new connector', async () => {
    const workflow = await client.createWorkflow({ name: 'aaa-choice', workflow_type: 'basic' });
    const home = newHome();
    const env = onboardingEnv(ob, home, { SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob), SYNCAUTH_CONNECTOR_NAME: 'asked-existing' });
    const final = await inTmux(home, env, [], async (t) => {
      await t.see(/Which workflow should read from the connector\?/);
      expect(t.screen()).toContain(`aaa-choice (${workflow.id})`);
      t.press('Enter');
      await t.see(/How often should it run\?/);
      // Keep its schedule, every 15 minutes, every hour, every 2 hours, every 4 hours.
      for (let i = 0; i < 4; i += 1) t.press('Down');
      t.press('Enter');
    });
    expect(final, final).toContain('exit=0');
    const state = readProfileState(home, 'default');
    expect(state?.workflowId).toBe(workflow.id);
    expect(state?.schedule).toBe('every 4 hours');
    const wired = await client.getWorkflow(workflow.id);
    expect(wired.sources).toEqual([state?.connectorId]);
    expect(wired.schedule?.crontab_entries.map((e) => e.cron_expression)).toEqual(['0 */4 * * *']);
  });

  it('the workflow question: a new workflow, made once the connector exists and recorded in the profile', async () => {
    const count = (await client.listWorkflows()).length;
    const home = newHome();
    const env = onboardingEnv(ob, home, { SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob), SYNCAUTH_CONNECTOR_NAME: 'asked-new' });
    const final = await inTmux(home, env, [], async (t) => {
      await t.see(/Which workflow should read from the connector\?/);
      for (let i = 0; i < count; i += 1) t.press('Down');
      t.press('Enter');
      await t.see(/Name of the new workflow/);
      t.press('Enter');
      await t.see(/How often should it run\?/);
      t.press('Enter');
    });
    expect(final, final).toContain('exit=0');
    const created = (await client.listWorkflows()).find((w) => w.name === 'asked-new');
    expect(created).toBeDefined();
    const state = readProfileState(home, 'default');
    expect(state?.workflowId).toBe(created?.id);
    expect(created?.sources).toEqual([state?.connectorId]);
    expect(final).toContain(`workflow asked-new (${created?.id}) created; it reads from it`);
  });

  it('the workflow question: none, and the connector is set up alone', async () => {
    const count = (await client.listWorkflows()).length;
    const home = newHome();
    const env = onboardingEnv(ob, home, { SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob), SYNCAUTH_CONNECTOR_NAME: 'asked-none' });
    const final = await inTmux(home, env, [], async (t) => {
      await t.see(/Which workflow should read from the connector\?/);
      for (let i = 0; i < count + 1; i += 1) t.press('Down');
      t.press('Enter');
    });
    expect(final, final).toContain('exit=0');
    expect(readProfileState(home, 'default')?.workflowId).toBeUndefined();
    expect((await client.listWorkflows()).length).toBe(count);
  });

  it('a re-run shows its changes and asks; No leaves the profile as it was, Yes applies them', async () => {
    const home = await onboarded('asked-rerun');
    const before = readFileSync(profileFile(home, 'default'), 'utf8');
    const env = onboardingEnv(ob, home, {
      SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob), SYNCAUTH_CONNECTOR_NAME: 'asked-rerun', SYNCAUTH_REMOTE_URL: 'dropbox://data/archive',
    });
    const declined = await inTmux(home, env, ['--no-workflow'], async (t) => {
      await t.see(/Apply these changes to profile "default"\?/);
      expect(t.screen()).toMatch(/Dropbox folder\s+dropbox:\/\/data → dropbox:\/\/data\/archive/);
      t.press('Enter');
    });
    expect(declined).toContain('exit=1');
    expect(declined).toContain('cancelled; nothing was written');
    expect(readFileSync(profileFile(home, 'default'), 'utf8')).toBe(before);

    const accepted = await inTmux(home, { ...env, SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob) }, ['--no-workflow'], async (t) => {
      await t.see(/Apply these changes to profile "default"\?/);
      t.press('y');
      t.press('Enter');
    });
    expect(accepted, accepted).toContain('exit=0');
    expect(readProfileState(home, 'default')?.remoteUrl).toBe('dropbox://data/archive');
  });

  it("someone else's connector of the same name: asked before the browser, and taken over on yes", async () => {
    const foreign = await client.createSource({
      name: 'asked-adopt', type: 'dropbox',
      config: { remote_url: 'dropbox://data', token: 'sl.other', app_key: OTHER_APP.appKey, app_secret: OTHER_APP.appSecret, refresh_token: 'other-refresh' },
    });
    const home = newHome();
    const env = onboardingEnv(ob, home, { SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob), SYNCAUTH_CONNECTOR_NAME: 'asked-adopt' });
    const final = await inTmux(home, env, ['--no-workflow'], async (t) => {
      await t.see(/Take it over\?/);
      expect(t.screen()).toContain(`(${foreign.id}) already exists and may not be this profile's: it belongs to another Dropbox app`);
      t.press('y');
      t.press('Enter');
    });
    expect(final, final).toContain('exit=0');
    expect(readProfileState(home, 'default')?.connectorId).toBe(foreign.id);
    expect((await client.getSource(foreign.id)).config.app_key).toBe(ob.app.appKey);
  });

  it('no Secret Service: both ways out are named, the file store is offered, and its key is asked twice, hidden', async () => {
    const home = newHome();
    const storeKey = 'typed-store-key-canary-7f3e9a1c';
    const env = onboardingEnv(ob, home, {
      SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob), SYNCAUTH_CONNECTOR_NAME: 'asked-store',
      SYNCAUTH_STORE: undefined, SYNCAUTH_STORE_KEY: undefined,
      // A session bus that is not there: what a headless host without a desktop session has.
      DBUS_SESSION_BUS_ADDRESS: `unix:path=${path.join(home.dir, 'no-bus')}`,
    });
    const final = await inTmux(home, env, ['--no-workflow'], async (t) => {
      await t.see(/in an encrypted file in .* instead\?/);
      const offer = t.screen();
      expect(offer).toContain('the OS keychain is not available');
      expect(offer).toContain('SYNCAUTH_STORE=file');
      expect(offer).toContain('SYNCAUTH_STORE=env');
      t.press('Enter');
      await t.see(/A key for the new encrypted file store/);
      t.type('too-short');
      t.press('Enter');
      await t.see(/at least 16 characters/);
      for (let i = 0; i < 'too-short'.length; i += 1) t.press('BSpace');
      t.type(storeKey);
      t.press('Enter');
      await t.see(/The same key again/);
      t.type(storeKey);
      t.press('Enter');
    });
    expect(final, final).toContain('exit=0');
    expect(final).toContain(`the secrets are in the encrypted file store, recorded in ${path.join(home.configDir, 'config.json')}`);
    expect(final).not.toContain(storeKey);
    expect(existsSync(path.join(home.configDir, 'secrets.enc'))).toBe(true);
    expect((await storedSecrets({ ...home, storeKey }, 'default')).refresh_token).toBeTruthy();
    // The choice is remembered: the next command needs the key, not SYNCAUTH_STORE=file.
    expect(JSON.parse(readFileSync(path.join(home.configDir, 'config.json'), 'utf8'))).toEqual({ version: 1, profiles: { default: { store: 'file' } } });
    const token = await runCli(['token', '--force'], { env: { ...env, SYNCAUTH_STORE_KEY: storeKey }, cwd: home.dir });
    expect(token.stderr).not.toMatch(/keychain|D-Bus/i);
    expect(token.code).toBe(0);
    expect(token.stdout).toMatch(/^sl\./);
  });

  it('eleven questions (file store key twice, every value, a new workflow and its schedule): no listener warning', async () => {
    const home = newHome();
    const full = onboardingEnv(ob, home, {});
    const storeKey = 'eleven-questions-store-key-5b1d';
    const env = {
      SYNCAUTH_CONFIG_DIR: full.SYNCAUTH_CONFIG_DIR,
      SYNCAUTH_AUTHORIZE_URL: full.SYNCAUTH_AUTHORIZE_URL, SYNCAUTH_TOKEN_URL: full.SYNCAUTH_TOKEN_URL,
      SYNCAUTH_DROPBOX_API_URL: full.SYNCAUTH_DROPBOX_API_URL, SYNCAUTH_REDIRECT_URI: full.SYNCAUTH_REDIRECT_URI,
      SYNCAUTH_CONNECTOR_NAME: 'asked-eleven',
      DBUS_SESSION_BUS_ADDRESS: `unix:path=${path.join(home.dir, 'no-bus')}`,
    };
    const count = (await client.listWorkflows()).length;
    const final = await inTmux(home, env, ['--no-open'], async (t) => {
      await t.see(/in an encrypted file in .* instead\?/);
      t.press('Enter');
      const keyTwice: [RegExp, string][] = [[/A key for the new encrypted file store/, storeKey], [/The same key again/, storeKey]];
      for (const [question, answer] of [...keyTwice, ...setupAnswers(ob)]) {
        await t.see(question);
        t.type(answer);
        t.press('Enter');
      }
      await t.see(/Which workflow should read from the connector\?/);
      for (let i = 0; i < count; i += 1) t.press('Down');
      t.press('Enter');
      await t.see(/Name of the new workflow/);
      t.press('Enter');
      await t.see(/How often should it run\?/);
      t.press('Enter');
      await t.see(AUTHORIZE_URL_PATTERN);
      await approveLikeABrowser(AUTHORIZE_URL_PATTERN.exec(t.screen())?.[1] as string);
    });
    expect(final, final).toContain('exit=0');
    expect(final).not.toContain('MaxListenersExceededWarning');
  });

  it('Ctrl-C at a question exits 130, as the README promises, and nothing is written', async () => {
    const home = newHome();
    const full = onboardingEnv(ob, home, {});
    const env = { SYNCAUTH_CONFIG_DIR: full.SYNCAUTH_CONFIG_DIR, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: home.storeKey };
    const final = await inTmux(home, env, [], async (t) => {
      await t.see(/base URL/);
      t.type(ob.emulator.url);
      t.press('Enter');
      await t.see(/Service API key/);
      t.press('C-c');
    });
    expect(final, final).toContain('exit=130');
    expect(final).toContain('cancelled; nothing was written');
    expect(existsSync(profileFile(home, 'default'))).toBe(false);
    expect(existsSync(path.join(home.configDir, 'secrets.enc'))).toBe(false);
  });

  it('Ctrl-C during the browser wait exits 130 too', async () => {
    const home = newHome();
    const env = onboardingEnv(ob, home, { SYNCAUTH_CONNECTOR_NAME: 'asked-ctrl-c-wait' });
    const final = await inTmux(home, env, ['--no-open', '--no-workflow'], async (t) => {
      await t.see(AUTHORIZE_URL_PATTERN);
      t.press('C-c');
    });
    expect(final, final).toContain('exit=130');
    expect(existsSync(profileFile(home, 'default'))).toBe(false);
  });
});
