// `syncauth demo` (`npm run demo`): the main job end to end on the emulator, with the real commands a user
// would type, each run as its own process. Nothing needs an account or the network, and nothing outlives it:
// profile state and the (encrypted) secret store live in a temporary directory removed at the end.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_APP, connectionSettings, startEmulator } from '../../emulator/index.js';
import { ExitCode, SyncauthError } from '../../errors.js';
import type { CommandContext } from '../context.js';
import { REAUTH_DEMO_TOKEN_SECONDS, reauthLoop } from './demo-reauth.js';

const CLI = fileURLToPath(new URL('../main.js', import.meta.url));

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** What a browser does after Allow on the emulator's page: follow its redirect to the loopback callback. */
async function approveLikeABrowser(authorizeUrl: string): Promise<void> {
  const page = await fetch(authorizeUrl, { redirect: 'manual' });
  const location = page.headers.get('location');
  if (!location) throw new Error(`the authorize page answered ${page.status} without a redirect`);
  await (await fetch(location)).text();
}

interface Step {
  args: string[];
  /** Called with each stderr chunk, to react to what the command prints (the authorize URL). */
  onStderr?: (text: string) => void;
}

export async function demo(context: CommandContext, options: { browser?: boolean; reauth?: boolean }): Promise<void> {
  const { io } = context;
  const port = await freePort();
  const redirectUri = `http://127.0.0.1:${port}/callback`;
  // With --reauth, the daemon's re-authorization page is registered too, and tokens are short (demo-reauth.ts).
  const publicUrl = options.reauth ? `http://127.0.0.1:${await freePort()}` : undefined;
  const emulator = await startEmulator({
    apps: [{ ...DEFAULT_APP, redirectUris: [redirectUri, ...(publicUrl ? [`${publicUrl}/reauthorize/callback`] : [])] }],
    autoApprove: !options.browser,
    ...(options.reauth ? { tokenLifetimeSeconds: REAUTH_DEMO_TOKEN_SECONDS } : {}),
  });
  const home = await mkdtemp(path.join(tmpdir(), 'syncauth-demo-'));
  const workflowId = emulator.seeded?.workflowId;
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: home,
    SYNCAUTH_PROFILE: 'demo',
    SYNCAUTH_CONFIG_DIR: path.join(home, 'config'),
    SYNCAUTH_STORE: 'file',
    SYNCAUTH_STORE_KEY: randomBytes(24).toString('base64url'),
    ...connectionSettings(emulator),
    SYNCAUTH_REDIRECT_URI: redirectUri,
    SYNCAUTH_REMOTE_URL: 'dropbox://data',
    SYNCAUTH_RECURSIVE: 'true',
    ...(workflowId ? { SYNCAUTH_WORKFLOW_ID: workflowId, SYNCAUTH_SCHEDULE: 'every 4 hours' } : {}),
  };

  const run = (step: Step): Promise<void> =>
    new Promise((resolve, reject) => {
      io.stdout.write(`\n$ syncauth ${step.args.map((a) => (/\s/.test(a) ? `"${a}"` : a)).join(' ')}\n`);
      const child = spawn(process.execPath, [CLI, ...step.args], { cwd: home, env, stdio: ['ignore', 'pipe', 'pipe'] });
      // Whole lines, setup's "Next:" left out: it names the demo's profile, which is gone when the demo ends.
      let pending = '';
      const show = (text: string): void => void io.stdout.write(text.split(/(?<=\n)/).filter((line) => !line.startsWith('Next: ')).join(''));
      child.stdout.on('data', (chunk: Buffer) => {
        const text = pending + chunk.toString('utf8');
        const end = text.lastIndexOf('\n') + 1;
        pending = text.slice(end);
        show(text.slice(0, end));
      });
      child.stdout.on('end', () => show(pending));
      child.stderr.on('data', (chunk: Buffer) => {
        io.stderr.write(chunk);
        step.onStderr?.(chunk.toString('utf8'));
      });
      child.on('error', reject);
      child.on('close', (code) => (code === 0 ? resolve() : reject(new SyncauthError('SYNCAUTH_DEMO_FAILED', `\`syncauth ${step.args.join(' ')}\` exited ${code}`, { exitCode: ExitCode.error }))));
    });

  io.stdout.write(`syncauth demo: a local emulator of the service and of Dropbox runs on ${emulator.url}\n`);
  io.stdout.write(`Its Dropbox app "${DEFAULT_APP.name}" has the app folder Apps/${DEFAULT_APP.folderName} with a subfolder data/.\n`);
  io.stdout.write(options.browser ? 'Click Allow in the browser window that opens.\n' : 'The authorize page is approved automatically, as if you clicked Allow.\n');
  try {
    let seen = '';
    let approving: Promise<void> | undefined;
    await run({
      args: ['setup', '--yes', ...(options.browser ? [] : ['--no-open']), ...(publicUrl ? ['--public-url', publicUrl] : [])],
      onStderr: (text) => {
        seen += text;
        const url = /\s(http:\/\/127\.0\.0\.1:\d+\/oauth2\/authorize\?\S+)/.exec(seen)?.[1];
        if (url && !approving && !options.browser) approving = approveLikeABrowser(url);
      },
    });
    await approving;
    await run({ args: ['source', 'list'] });
    if (workflowId) await run({ args: ['workflow', 'get', workflowId] });
    await run({ args: ['refresh'] });
    await run({ args: ['status'] });
    if (publicUrl) {
      await reauthLoop({ context, emulator, env, home, cli: CLI, publicUrl, browser: options.browser === true, freePort, run: (args) => run({ args }) });
    }
    io.stdout.write(
      '\nDone. The demo\'s profile goes with its temporary directory. Next, with your own Dropbox app and service: ' +
        '`syncauth setup` makes a profile of your own, and `syncauth daemon` keeps renewing its token before its 4 hours are up.\n',
    );
  } finally {
    await emulator.close();
    await rm(home, { recursive: true, force: true });
  }
}
