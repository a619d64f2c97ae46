// The README's quick start, walked through as a person on a fresh machine would: its commands, read from the
// README and run as printed, in order, against the emulator. `syncauth` is on PATH as the install puts it;
// the environment only says where Dropbox is (the emulator's authorize, token and API URLs and its redirect
// URI) and which secret store to use (the encrypted file with its key), as a headless host would. The person
// types the rest at a real terminal (tmux): the service's base URL and API key, the app key and secret, the
// folder, the workflow and the schedule; the browser setup opens clicks Allow. Then the daemon renews the
// token and gives the connector the new one, and `syncauth status` exits 0.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeWarnings } from '../helpers/cli.js';
import { quickStartCommands, recordingBrowser, syncauthOnPath } from '../helpers/docs.js';
import { approveLikeABrowser, newHome, onboardingEnv, setupAnswers, sources, startOnboarding, type Onboarding } from '../helpers/onboarding.js';
import { isCI } from '../helpers/secret-service.js';
import { hasTmux, openTerminal } from '../helpers/terminal.js';
import { waitFor } from '../helpers/wait.js';

const tmuxNote = hasTmux ? '' : '[skipped: tmux is not installed; with CI set this fails instead] ';

/** What the person runs, in the README's order: each key is a command as the README prints it. */
const WALK = ['syncauth setup', 'syncauth daemon', 'syncauth status'];

let ob: Onboarding;
beforeAll(async () => {
  // Tokens live 10 minutes, inside the daemon's 15-minute margin: its first sweep renews the one setup got.
  ob = await startOnboarding({ emulator: { tokenLifetimeSeconds: 600 } });
});
afterAll(async () => {
  await ob.emulator.close();
});

function run(line: string, env: Record<string, string>, cwd: string) {
  const child = spawn('/bin/sh', ['-c', `exec ${line}`], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
  child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
  const exit = new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve(code));
  });
  return { child, exit, output: () => ({ stdout, stderr }) };
}

describe.skipIf(!hasTmux && !isCI())(`${tmuxNote}the README's quick start, as printed`, () => {
  it('setup at a terminal, the daemon renewing, status exiting 0', async () => {
    const commands = quickStartCommands();
    // A new or changed command in the quick start must be walked here too.
    expect(commands.map((c) => c.key)).toEqual(WALK);

    const home = newHome();
    const opened = path.join(home.dir, 'opened.txt');
    const full = onboardingEnv(ob, home);
    const env: Record<string, string> = {
      PATH: `${syncauthOnPath(home.dir)}:${process.env.PATH ?? '/usr/bin:/bin'}`,
      HOME: home.dir,
      TERM: 'xterm-256color',
      BROWSER: recordingBrowser(home.dir, opened),
      NODE_REDIRECT_WARNINGS: path.join(home.dir, 'node-warnings.txt'),
      // Where Dropbox is: the emulator's stand-ins for Dropbox's own URLs, and the redirect URI its app has.
      SYNCAUTH_AUTHORIZE_URL: full.SYNCAUTH_AUTHORIZE_URL as string,
      SYNCAUTH_TOKEN_URL: full.SYNCAUTH_TOKEN_URL as string,
      SYNCAUTH_DROPBOX_API_URL: full.SYNCAUTH_DROPBOX_API_URL as string,
      SYNCAUTH_REDIRECT_URI: ob.redirectUri,
      // A host without a keychain: the encrypted file store, its key in the environment.
      SYNCAUTH_STORE: 'file',
      SYNCAUTH_STORE_KEY: home.storeKey,
    };
    const [setup, daemon, status] = commands.map((c) => c.text) as [string, string, string];
    const workflowId = ob.emulator.seeded?.workflowId as string;

    // 3. Run setup, and answer its questions.
    const terminal = openTerminal(setup, { env, cwd: home.dir });
    try {
      await terminal.see(/Create app/);
      const answers = setupAnswers(ob);
      for (const [question, answer] of answers) {
        await terminal.see(question);
        terminal.type(answer);
        terminal.press('Enter');
      }
      // The workspace's workflow (the first choice), then every 4 hours (keep none, 15 min, 1 h, 2 h, 4 h).
      await terminal.see(/Which workflow should read from the connector\?/);
      terminal.press('Enter');
      await terminal.see(/How often should it run\?/);
      for (let i = 0; i < 4; i += 1) terminal.press('Down');
      terminal.press('Enter');
      // The browser setup opened: Allow.
      const url = await waitFor('setup to open the browser', () => (existsSync(opened) ? readFileSync(opened, 'utf8').trim() || undefined : undefined), 20_000);
      await approveLikeABrowser(url);
      const { code, screen } = await terminal.exit();
      expect(code, screen).toBe(0);
      expect(screen).toMatch(/✓ source connector dropbox-data created/);
      // The next commands are printed as the person runs syncauth here: from PATH.
      expect(screen).toMatch(/Next: .*`syncauth workflow run [0-9a-f-]+`.*`syncauth daemon --profile default`/);
      for (const secret of [ob.apiKey, ob.app.appSecret, home.storeKey]) expect(screen).not.toContain(secret);
      expect(nodeWarnings(screen)).toEqual([]);
    } finally {
      terminal.close();
    }
    const made = sources(ob);
    expect(made.map((s) => s.name)).toEqual(['dropbox-data']);
    const connector = made[0]!;
    const wired = ob.emulator.state.workspaces.get('default')?.workflows.get(workflowId);
    expect(wired?.sources).toEqual([connector.id]);
    expect(wired?.schedule?.crontab_entries.map((e) => e.cron_expression)).toEqual(['0 */4 * * *']);
    const tokenOfSetup = connector.config.token;

    // 4. Start the daemon; it renews the token (inside the margin) and gives the connector the new one.
    const running = run(daemon, env, home.dir);
    try {
      await waitFor('the daemon to renew and update the connector', () => {
        const { stdout, stderr } = running.output();
        return /"event":"renewal\.succeeded"/.test(stdout + stderr) && sources(ob)[0]?.config.token !== tokenOfSetup ? true : undefined;
      }, 30_000);

      // From another terminal: status exits 0.
      const checked = run(status, env, home.dir);
      const code = await checked.exit;
      expect(code, checked.output().stderr).toBe(0);
      expect(checked.output().stdout).toContain('dropbox-data');
    } finally {
      running.child.kill('SIGTERM');
    }
    expect(await running.exit, running.output().stderr).toBe(0);
    expect(nodeWarnings(running.output().stderr)).toEqual([]);
    const warnings = path.join(home.dir, 'node-warnings.txt');
    expect(existsSync(warnings) ? readFileSync(warnings, 'utf8') : '').toBe('');
  }, 120_000);
});
