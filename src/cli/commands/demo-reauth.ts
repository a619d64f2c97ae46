// `syncauth demo --reauth`: after the main job, the loop a person closes when Dropbox stops honouring a grant,
// with the real daemon process: it serves the re-authorization page and sends signed notices to a receiver
// here that verifies each signature (Standard Webhooks) and refuses what does not verify; the app is unlinked
// at the emulated Dropbox; the notice arrives with its link; the link is opened and Allow clicked (approved
// automatically as setup's authorize page is, or by the person with --browser); the profile is live again.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { RunningEmulator } from '../../emulator/index.js';
import { DEFAULT_APP } from '../../emulator/index.js';
import { ExitCode, SyncauthError } from '../../errors.js';
import { parseNotifySecret, signature } from '../../notify/signing.js';
import type { CommandContext } from '../context.js';

/** How long the emulator's access tokens live under --reauth, and the margin the daemon renews them with. */
export const REAUTH_DEMO_TOKEN_SECONDS = 40;
const RENEW_MARGIN_SECONDS = 35;
/** How long a signed notice's timestamp may differ from this clock, as the Standard Webhooks libraries allow. */
const TOLERANCE_SECONDS = 300;

interface Notice {
  type: string;
  data: { profile?: string; link?: string; linkExpiresAt?: string };
}

interface ReceiverHere {
  url: string;
  notices: Notice[];
  refused: number;
  close(): Promise<void>;
}

/** Verifies one delivery as a Standard Webhooks receiver does: the v1 HMAC over id.timestamp.body, a fresh timestamp. */
export function verified(key: Buffer, headers: Record<string, string | string[] | undefined>, body: string): boolean {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const signatures = headers['webhook-signature'];
  if (typeof id !== 'string' || typeof timestamp !== 'string' || typeof signatures !== 'string' || !/^\d+$/.test(timestamp)) return false;
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > TOLERANCE_SECONDS) return false;
  const expected = Buffer.from(signature(key, id, Number(timestamp), body));
  return signatures.split(' ').some((given) => {
    const bytes = Buffer.from(given);
    return bytes.length === expected.length && timingSafeEqual(bytes, expected);
  });
}

async function startReceiver(secret: string): Promise<ReceiverHere> {
  const key = parseNotifySecret(secret);
  const notices: Notice[] = [];
  const here = { refused: 0 };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      if (req.method !== 'POST' || !verified(key, req.headers, body)) {
        here.refused += 1;
        res.writeHead(401).end();
        return;
      }
      try {
        notices.push(JSON.parse(body) as Notice);
      } catch {
        res.writeHead(400).end();
        return;
      }
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    notices,
    get refused() {
      return here.refused;
    },
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}

async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined> | T | undefined): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new SyncauthError('SYNCAUTH_DEMO_FAILED', `the demo waited ${Math.round(timeoutMs / 1000)} s for ${what}`, { exitCode: ExitCode.error });
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** What a browser does on the page with Allow approved at once: Continue to Dropbox, back to the callback; the page's title. */
async function clickThrough(link: string): Promise<string> {
  const page = await (await fetch(link)).text();
  const href = /id="authorize" href="([^"]+)"/.exec(page)?.[1];
  if (!href) throw new SyncauthError('SYNCAUTH_DEMO_FAILED', 'the re-authorization page offered no way to Dropbox', { exitCode: ExitCode.error });
  const authorize = href.replaceAll('&amp;', '&');
  const dropbox = await fetch(authorize, { redirect: 'manual' });
  const back = dropbox.headers.get('location');
  if (!back) throw new SyncauthError('SYNCAUTH_DEMO_FAILED', `Dropbox answered ${dropbox.status} without sending the browser back`, { exitCode: ExitCode.error });
  const done = await (await fetch(back)).text();
  return /<title>([^<]*)<\/title>/.exec(done)?.[1] ?? '';
}

export interface ReauthLoop {
  context: CommandContext;
  emulator: RunningEmulator;
  env: Record<string, string>;
  home: string;
  cli: string;
  publicUrl: string;
  browser: boolean;
  freePort(): Promise<number>;
  /** Runs a command of the demo as its own process, printing it. */
  run(args: string[]): Promise<void>;
}

export async function reauthLoop(loop: ReauthLoop): Promise<void> {
  const { io } = loop.context;
  const say = (text: string): void => void io.stdout.write(text);
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const receiver = await startReceiver(secret);
  const healthPort = await loop.freePort();
  const pagePort = Number(new URL(loop.publicUrl).port);
  const tokenFile = path.join(loop.home, 'token');
  const args = [
    'daemon', '--token-file', tokenFile, '--sweep', '* * * * * *', '--renew-margin', String(RENEW_MARGIN_SECONDS),
    '--listen', `127.0.0.1:${healthPort}`, '--reauth-listen', `127.0.0.1:${pagePort}`, '--public-url', loop.publicUrl, '--notify-url', receiver.url,
  ];
  say('\nRe-authorization: when Dropbox stops honouring a grant, the daemon parks the profile and sends a signed notice\n');
  say('with a link to its page; one click at Dropbox and the profile is live again.\n');
  say(`A receiver here verifies each notice's signature (Standard Webhooks) and refuses what does not verify: ${receiver.url}\n`);
  say(`\n$ SYNCAUTH_NOTIFY_SECRET=whsec_… syncauth ${args.map((a) => (/\s/.test(a) ? `'${a}'` : a)).join(' ')} &\n`);
  let daemon: ChildProcess | undefined;
  let logs = '';
  try {
    daemon = spawn(process.execPath, [loop.cli, ...args], {
      cwd: loop.home, env: { ...loop.env, SYNCAUTH_NOTIFY_SECRET: secret, SYNCAUTH_LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => daemon?.on('close', resolve));
    let gone = false;
    void exited.then(() => (gone = true));
    daemon.stdout?.setEncoding('utf8').on('data', (d: string) => (logs += d));
    daemon.stderr?.setEncoding('utf8').on('data', (d: string) => (logs += d));
    const readyz = async (): Promise<number> => {
      if (gone) throw new SyncauthError('SYNCAUTH_DEMO_FAILED', `the daemon exited:\n${logs.slice(-2_000)}`, { exitCode: ExitCode.error });
      return (await fetch(`http://127.0.0.1:${healthPort}/readyz`).catch(() => undefined))?.status ?? 0;
    };
    await until('the daemon to be ready', 30_000, async () => ((await readyz()) === 200 ? true : undefined));
    say(`The daemon is ready (/readyz 200), its page on ${loop.publicUrl}; tokens live ${REAUTH_DEMO_TOKEN_SECONDS} s here, so it renews every few seconds.\n`);

    // What the account's owner does at Dropbox: Settings, Connected apps, Disconnect.
    const disconnect = `${loop.emulator.url}/account/connected_apps/disconnect`;
    say(`\nAt Dropbox the app is unlinked (Settings, Connected apps, Disconnect):\n$ curl -s -X POST -d app_key=${DEFAULT_APP.appKey} ${disconnect}\n`);
    const unlinked = await fetch(disconnect, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: `app_key=${DEFAULT_APP.appKey}` });
    say(`${await unlinked.text()}\n`);

    const needed = await until('the notice profile.reauthorization_needed', 60_000, async () => {
      await readyz();
      return receiver.notices.find((n) => n.type === 'profile.reauthorization_needed');
    });
    const link = needed.data.link;
    if (!link) throw new SyncauthError('SYNCAUTH_DEMO_FAILED', 'the notice carried no link', { exitCode: ExitCode.error });
    say(`\nThe daemon met the revoked grant and parked the profile (/readyz ${await readyz()}). The receiver got, signature verified:\n`);
    say(`  ${needed.type} for profile "${needed.data.profile ?? ''}", link ${link} (until ${needed.data.linkExpiresAt ?? '?'})\n`);

    if (loop.browser) {
      say('\nOpen the link, click "Continue to Dropbox", then Allow (opening it in your browser now).\n');
      try {
        const { default: open } = await import('open');
        await open(link);
      } catch {
        say('Could not start a browser; open the link above yourself.\n');
      }
    } else {
      say('\nThe link is opened, "Continue to Dropbox" followed and Allow approved automatically, as a browser would.\n');
      say(`The page says: ${await clickThrough(link)}\n`);
    }
    const reauthorized = await until('the notice profile.reauthorized', loop.browser ? 600_000 : 60_000, async () => {
      await readyz();
      return receiver.notices.find((n) => n.type === 'profile.reauthorized');
    });
    await until('/readyz to answer 200 again', 30_000, async () => ((await readyz()) === 200 ? true : undefined));
    say(`The receiver got, signature verified: ${reauthorized.type} for profile "${reauthorized.data.profile ?? ''}". /readyz is 200 again.\n`);
    if (receiver.refused > 0) say(`(The receiver refused ${receiver.refused} request(s) whose signature did not verify.)\n`);
    await loop.run(['status']);
    daemon.kill('SIGTERM');
    await exited;
  } finally {
    if (daemon && daemon.exitCode === null && daemon.signalCode === null) daemon.kill('SIGKILL');
    await receiver.close();
  }
}
