// The notifier in-process, on a hand-moved clock: signatures a reference verifier accepts (first attempt and
// retry), at-least-once delivery through a receiver's outage, the 24 h limit, permanent failures, the
// reminders of a profile waiting for re-authorization, the outbox file, and no secret anywhere it writes.
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import type { ProfileNotice } from '../../src/notify/notice.js';
import { FileOutbox, Notifier, OUTBOX_FILE, resolveNotifySettings, type NotifierOptions } from '../../src/notify/index.js';
import { subkey } from '../../src/record-keys.js';
import { captureLog, fakeClock } from '../daemon/helpers.js';
import { startReceiver } from './receiver.js';

const SECRET = `whsec_${Buffer.from('0123456789abcdef0123456789abcdef').toString('base64')}`;
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

function tempConfig(): string {
  return mkdtempSync(path.join(tmpdir(), 'syncauth-notify-'));
}

function reauthNeeded(at: number, profile = 'docs', transition = 'v1:OAUTH_INVALID_GRANT'): ProfileNotice {
  return {
    type: 'profile.reauthorization_needed',
    profile,
    connectorId: 'conn-1',
    folder: 'dropbox://data',
    reason: 'the grant was revoked or has expired',
    errorCode: 'OAUTH_INVALID_GRANT',
    at,
    transition,
  };
}

async function notifierFor(urls: string[], options: Partial<NotifierOptions> & { configDir?: string; format?: string; secret?: string } = {}) {
  const clock = fakeClock();
  const log = captureLog();
  const configDir = options.configDir ?? tempConfig();
  const settings = resolveNotifySettings({ urls, urlField: '--notify-url', format: options.format ?? 'standard', ...(options.secret !== '' ? { secret: options.secret ?? SECRET } : {}) });
  // As the daemon opens it: sealed under a subkey of the notify secret's key, when there is one.
  const store = await FileOutbox.open(configDir, log.logger, settings.key ? subkey(settings.key, 'outbox-file') : undefined);
  const notifier = new Notifier({ ...settings, store, log: log.logger, now: clock.now, random: () => 0.5, pollMs: false, ...options });
  return { notifier, clock, log, configDir };
}

describe('signed notices', () => {
  it('signs the first attempt and a retry so the reference verifier accepts both: same id and body, fresh timestamp and signature', async () => {
    const receiver = await startReceiver();
    receiver.status = 503;
    const { notifier, clock } = await notifierFor([receiver.url]);
    notifier.notice({ ...reauthNeeded(clock.now()), type: 'connector.failing' });
    await notifier.tick();
    receiver.status = 200;
    clock.advance(10 * MINUTE);
    await notifier.tick();
    expect(receiver.received).toHaveLength(2);
    const [first, retry] = receiver.received as [(typeof receiver.received)[0], (typeof receiver.received)[0]];
    const verifier = new Webhook(SECRET);
    for (const request of [first, retry]) {
      const headers = { 'webhook-id': String(request.headers['webhook-id']), 'webhook-timestamp': String(request.headers['webhook-timestamp']), 'webhook-signature': String(request.headers['webhook-signature']) };
      // The reference library refuses timestamps more than 5 minutes from its own clock: check on ours.
      const realNow = Date.now;
      Date.now = () => Number(headers['webhook-timestamp']) * 1000;
      try {
        expect(verifier.verify(request.body, headers)).toMatchObject({ type: 'connector.failing', data: { profile: 'docs', connectorId: 'conn-1', folder: 'dropbox://data' } });
      } finally {
        Date.now = realNow;
      }
    }
    expect(retry.headers['webhook-id']).toBe(first.headers['webhook-id']);
    expect(retry.body).toBe(first.body);
    expect(Number(retry.headers['webhook-timestamp'])).toBe(Number(first.headers['webhook-timestamp']) + 600);
    expect(retry.headers['webhook-signature']).not.toBe(first.headers['webhook-signature']);
    // A wrong secret does not verify.
    const wrong = new Webhook(`whsec_${Buffer.from('another-secret-of-32-bytes-long!').toString('base64')}`);
    expect(() => wrong.verify(first.body, { 'webhook-id': String(first.headers['webhook-id']), 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': String(first.headers['webhook-signature']) })).toThrow();
    await notifier.close();
  });

  it('sends the Standard Webhooks payload: type, timestamp, data with the profile, connector, folder, reason and code', async () => {
    const receiver = await startReceiver();
    const { notifier, clock } = await notifierFor([receiver.url]);
    const at = clock.now();
    notifier.notice({ ...reauthNeeded(at), type: 'token.unavailable', transition: 'spell-1' });
    await notifier.tick();
    expect(JSON.parse(receiver.received[0]?.body ?? '{}')).toEqual({
      type: 'token.unavailable',
      timestamp: new Date(at).toISOString(),
      data: { profile: 'docs', connectorId: 'conn-1', folder: 'dropbox://data', reason: 'the grant was revoked or has expired', errorCode: 'OAUTH_INVALID_GRANT' },
    });
    expect(receiver.received[0]?.headers['content-type']).toBe('application/json');
    expect(String(receiver.received[0]?.headers['webhook-id'])).toMatch(/^msg_[a-z2-7]{32}$/);
    await notifier.close();
  });

  it('sends a Slack body with the text and link previews off, still signed', async () => {
    const receiver = await startReceiver();
    const { notifier, clock } = await notifierFor([receiver.url], {
      format: 'slack',
      linkFor: async () => ({ url: 'https://auth.example.com/reauthorize/abc?x=1&y=<2>|', expiresAt: START_PLUS(72) }),
    });
    notifier.notice(reauthNeeded(clock.now()));
    await notifier.accepted();
    await notifier.tick();
    const body = JSON.parse(receiver.received[0]?.body ?? '{}') as { text: string; unfurl_links: boolean };
    expect(body.unfurl_links).toBe(false);
    expect(body.text).toContain('profile "docs" needs re-authorization');
    expect(body.text).toContain('folder dropbox://data, connector conn-1');
    expect(body.text).toContain('<https://auth.example.com/reauthorize/abc?x=1&y=%3C2%3E%7C|open the re-authorization page>');
    expect(receiver.received[0]?.headers['webhook-signature']).toMatch(/^v1,/);
    await notifier.close();
  });
});

function START_PLUS(hours: number): number {
  return Date.parse('2030-01-01T00:00:00Z') + hours * HOUR;
}

describe('delivery', () => {
  it('a receiver down for an hour gets each notice once, by webhook-id, when it returns', async () => {
    const receiver = await startReceiver();
    await receiver.stop();
    const { notifier, clock } = await notifierFor([receiver.url]);
    notifier.notice({ ...reauthNeeded(clock.now()), type: 'connector.failing', transition: 'a' });
    notifier.notice({ ...reauthNeeded(clock.now()), type: 'token.unavailable', transition: 'b' });
    // The same transition again (another sweep, another replica): the same id, queued once.
    notifier.notice({ ...reauthNeeded(clock.now()), type: 'token.unavailable', transition: 'b' });
    for (let minute = 0; minute < 60; minute++) {
      await notifier.tick();
      clock.advance(MINUTE);
    }
    await receiver.start();
    for (let minute = 0; minute < 60; minute++) {
      await notifier.tick();
      clock.advance(MINUTE);
    }
    expect([...receiver.deliveredIds().values()]).toEqual([1, 1]);
    expect(receiver.received).toHaveLength(2);
    await notifier.close();
  });

  it('retries 5xx, 408, 429 and dropped connections, stops at 24 h with one error line, and never retries a 400', async () => {
    const receiver = await startReceiver();
    receiver.status = 'drop';
    const { notifier, clock, log } = await notifierFor([receiver.url]);
    notifier.notice({ ...reauthNeeded(clock.now()), type: 'connector.failing', transition: 'x' });
    const statuses: (number | 'drop')[] = ['drop', 500, 408, 429, 503];
    for (let hour = 0; hour < 30; hour++) {
      receiver.status = statuses[hour % statuses.length] as number | 'drop';
      for (let step = 0; step < 6; step++) {
        await notifier.tick();
        clock.advance(10 * MINUTE);
      }
    }
    const attempts = receiver.received.length;
    expect(attempts).toBeGreaterThan(20);
    const dropped = log.records().filter((r) => r.event === 'notify.dropped');
    expect(dropped).toHaveLength(1);
    expect(dropped[0]).toMatchObject({ level: 50, type: 'connector.failing' });
    // Nothing after 24 h: the attempts stopped at the mark.
    receiver.status = 200;
    clock.advance(HOUR);
    await notifier.tick();
    expect(receiver.received.length).toBe(attempts);

    notifier.notice({ ...reauthNeeded(clock.now()), type: 'connector.failing', transition: 'y' });
    receiver.status = 400;
    for (let step = 0; step < 10; step++) {
      await notifier.tick();
      clock.advance(10 * MINUTE);
    }
    expect(receiver.received.length).toBe(attempts + 1);
    expect(log.records().filter((r) => r.event === 'notify.rejected')).toHaveLength(1);
    await notifier.close();
  });

  it('asks for re-authorization on the transition, 24 h and 72 h later with a fresh link each time, then stops; reauthorized ends it', async () => {
    const receiver = await startReceiver();
    let minted = 0;
    const { notifier, clock } = await notifierFor([receiver.url], {
      linkFor: async (profile) => ({ url: `https://auth.example.com/reauthorize/${profile}-${++minted}`, expiresAt: clock.now() + 72 * HOUR }),
    });
    const at = clock.now();
    notifier.notice(reauthNeeded(at));
    notifier.notice(reauthNeeded(at, 'other', 'w:OAUTH_INVALID_GRANT'));
    for (let hour = 0; hour < 24 * 5; hour++) {
      // Each sweep reports the same parked profile again: nothing new.
      notifier.notice(reauthNeeded(at));
      await notifier.tick();
      if (hour === 30) notifier.notice({ ...reauthNeeded(clock.now(), 'other', 'w:OAUTH_INVALID_GRANT'), type: 'profile.reauthorized', reason: 'new secrets were stored' });
      clock.advance(HOUR);
    }
    const bodies = receiver.received.map((r) => ({ id: String(r.headers['webhook-id']), ...(JSON.parse(r.body) as { type: string; timestamp: string; data: { profile: string; ask?: number; link?: string } }) }));
    const docs = bodies.filter((b) => b.data.profile === 'docs');
    expect(docs.map((b) => b.data.ask)).toEqual([1, 2, 3]);
    expect(new Set(docs.map((b) => b.id)).size).toBe(3);
    expect(new Set(docs.map((b) => b.data.link)).size).toBe(3);
    expect(docs.map((b) => Date.parse(b.timestamp) - at)).toEqual([0, 24 * HOUR, 72 * HOUR]);
    const other = bodies.filter((b) => b.data.profile === 'other');
    // Asked once, then reauthorized at hour 30: the 24 h reminder went, the 72 h one never.
    expect(other.map((b) => `${b.type}${b.data.ask ? `#${b.data.ask}` : ''}`)).toEqual(['profile.reauthorization_needed#1', 'profile.reauthorization_needed#2', 'profile.reauthorized']);
    await notifier.close();
  });
});

describe('the outbox file', () => {
  it('is private, versioned, and what a new notifier on the same dir delivers after a restart; reminders too', async () => {
    const receiver = await startReceiver();
    await receiver.stop();
    const first = await notifierFor([receiver.url]);
    first.notifier.notice({ ...reauthNeeded(first.clock.now()), type: 'connector.failing' });
    first.notifier.notice(reauthNeeded(first.clock.now()));
    await first.notifier.tick();
    await first.notifier.close();
    const file = path.join(first.configDir, OUTBOX_FILE);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const content = JSON.parse(readFileSync(file, 'utf8')) as { version: number; deliveries: unknown[]; reminders: unknown[] };
    expect(content.version).toBe(2);
    expect(content.deliveries).toHaveLength(2);
    expect(content.reminders).toHaveLength(1);
    expect(readFileSync(file, 'utf8')).not.toContain(receiver.url);

    await receiver.start();
    const second = await notifierFor([receiver.url], { configDir: first.configDir });
    second.notifier.notice(reauthNeeded(first.clock.now()));
    second.clock.advance(MINUTE);
    await second.notifier.tick();
    expect([...receiver.deliveredIds().values()]).toEqual([1, 1]);
    // The reminder survived the restart too.
    second.clock.advance(25 * HOUR);
    await second.notifier.tick();
    expect(receiver.received.map((r) => (JSON.parse(r.body) as { data: { ask?: number } }).data.ask)).toContain(2);
    await second.notifier.close();
  });

  it('refuses an outbox of an unknown version with a clear log line and leaves it as it was', async () => {
    const configDir = tempConfig();
    const file = path.join(configDir, OUTBOX_FILE);
    writeFileSync(file, JSON.stringify({ version: 99, deliveries: [] }), { mode: 0o600 });
    const receiver = await startReceiver();
    const { notifier, clock, log } = await notifierFor([receiver.url], { configDir });
    notifier.notice({ ...reauthNeeded(clock.now()), type: 'connector.failing' });
    await notifier.tick();
    expect(receiver.received).toHaveLength(1);
    expect(readFileSync(file, 'utf8')).toBe(JSON.stringify({ version: 99, deliveries: [] }));
    const refused = log.records().find((r) => r.event === 'notify.outbox_refused');
    expect(String(refused?.msg)).toContain('version 99');
    await notifier.close();
  });
});

describe('reminders of a profile fixed while no daemon ran', () => {
  it('end instead of asking again once the daemon says the profile renews', async () => {
    const receiver = await startReceiver();
    let resolved = false;
    const { notifier, clock, log } = await notifierFor([receiver.url], { isResolved: () => resolved });
    notifier.notice(reauthNeeded(clock.now()));
    await notifier.tick();
    expect(receiver.received).toHaveLength(1);
    // Set up again behind the daemon's back (a restart lost the parked state): no profile.reauthorized came.
    resolved = true;
    for (let hour = 0; hour < 80; hour++) {
      clock.advance(HOUR);
      await notifier.tick();
    }
    expect(receiver.received).toHaveLength(1);
    expect(log.records().filter((r) => r.event === 'notify.reminder_ended')).toHaveLength(1);
    await notifier.close();
  });
});

describe('closing', () => {
  it('does not wait for a receiver that hangs: the attempt is cancelled and the notice stays in the outbox', async () => {
    const { misbehavingServer, hang } = await import('../helpers/servers.js');
    const hung = await misbehavingServer(hang);
    const { notifier, clock, configDir } = await notifierFor([`${hung.url}/hook`], { attemptTimeoutMs: 60_000 });
    notifier.notice({ ...reauthNeeded(clock.now()), type: 'connector.failing' });
    await notifier.accepted();
    void notifier.tick();
    await hung.arrived('/hook');
    const started = performance.now();
    await notifier.close();
    expect(performance.now() - started).toBeLessThan(5_000);
    const content = JSON.parse(readFileSync(path.join(configDir, OUTBOX_FILE), 'utf8')) as { deliveries: { attempts: number }[] };
    expect(content.deliveries).toHaveLength(1);
  });
});
