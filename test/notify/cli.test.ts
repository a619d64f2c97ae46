// `syncauth notify test` and the daemon's notify settings as a user meets them: the built CLI in a process of
// its own, a receiver on 127.0.0.1 that checks signatures with the reference library, and bad input refused
// with exit 2, naming the field, before anything is sent.
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { startReceiver } from './receiver.js';

const SECRET = `whsec_${Buffer.from('a-notify-secret-of-32-bytes-here').toString('base64')}`;

function verify(received: { headers: Record<string, string | string[] | undefined>; body: string }, secret = SECRET): unknown {
  return new Webhook(secret).verify(received.body, {
    'webhook-id': String(received.headers['webhook-id']),
    'webhook-timestamp': String(received.headers['webhook-timestamp']),
    'webhook-signature': String(received.headers['webhook-signature']),
  });
}

describe('syncauth notify test', () => {
  it('sends one signed test event to each URL and prints what each answered: exit 0 when all took it', async () => {
    const a = await startReceiver();
    const b = await startReceiver();
    const result = await runCli(['notify', 'test', '--notify-url', a.url, '--notify-url', b.url], { env: { SYNCAUTH_NOTIFY_SECRET: SECRET } });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`ok   ${new URL(a.url).origin}: HTTP 200`);
    expect(result.stdout).toContain(`ok   ${new URL(b.url).origin}: HTTP 200`);
    for (const receiver of [a, b]) {
      expect(receiver.received).toHaveLength(1);
      expect(verify(receiver.received[0] as never)).toMatchObject({ type: 'syncauth.test' });
    }
    expect(result.stdout).not.toContain('/hook');
  });

  it('exits 1 when a URL does not take it, saying what it answered; the URLs may come from SYNCAUTH_NOTIFY_URL', async () => {
    const good = await startReceiver();
    const bad = await startReceiver();
    bad.status = 401;
    const down = await startReceiver();
    await down.stop();
    const result = await runCli(['notify', 'test'], { env: { SYNCAUTH_NOTIFY_SECRET: SECRET, SYNCAUTH_NOTIFY_URL: `${good.url}, ${bad.url},${down.url}` } });
    expect(result.code).toBe(1);
    expect(result.stdout).toContain(`ok   ${new URL(good.url).origin}: HTTP 200`);
    expect(result.stdout).toContain(`FAIL ${new URL(bad.url).origin}: HTTP 401`);
    expect(result.stdout).toMatch(new RegExp(`FAIL ${new URL(down.url).origin.replace(/\./g, '\\.')}: no answer: could not reach`));
    expect(result.stderr).toContain('2 of 3 notice URLs did not accept the test notice');
    expect(result.stderr).toContain('another secret than SYNCAUTH_NOTIFY_SECRET');
  });

  it('sends the Slack body, unsigned when there is no secret', async () => {
    const receiver = await startReceiver();
    const result = await runCli(['notify', 'test', '--notify-format', 'slack', '--notify-url', receiver.url]);
    expect(result.code).toBe(0);
    const body = JSON.parse(receiver.received[0]?.body ?? '{}') as { text?: string; unfurl_links?: boolean };
    expect(body.unfurl_links).toBe(false);
    expect(body.text).toContain('test notice from syncauth');
    expect(receiver.received[0]?.headers['webhook-signature']).toBeUndefined();
  });

  it.each([
    { what: 'plain http to another machine', args: ['--notify-url', 'http://hooks.example.com/x'], env: { SYNCAUTH_NOTIFY_SECRET: SECRET }, field: '--notify-url', says: 'must be https' },
    { what: 'a URL with a password', args: ['--notify-url', 'https://user:pw@hooks.example.com/x'], env: { SYNCAUTH_NOTIFY_SECRET: SECRET }, field: '--notify-url', says: 'user name or password' },
    { what: 'not a URL, from the variable', args: [], env: { SYNCAUTH_NOTIFY_SECRET: SECRET, SYNCAUTH_NOTIFY_URL: 'hooks.example.com' }, field: 'SYNCAUTH_NOTIFY_URL', says: 'absolute URL' },
    { what: 'no secret', args: ['--notify-url', 'RECEIVER'], env: {}, field: 'SYNCAUTH_NOTIFY_SECRET', says: 'is required' },
    { what: 'a secret without whsec_', args: ['--notify-url', 'RECEIVER'], env: { SYNCAUTH_NOTIFY_SECRET: 'not-a-whsec-secret-at-all' }, field: 'SYNCAUTH_NOTIFY_SECRET', says: 'must start with whsec_' },
    { what: 'a secret too short', args: ['--notify-url', 'RECEIVER'], env: { SYNCAUTH_NOTIFY_SECRET: `whsec_${Buffer.from('short').toString('base64')}` }, field: 'SYNCAUTH_NOTIFY_SECRET', says: 'at least 16 bytes' },
    { what: 'an unknown format', args: ['--notify-url', 'RECEIVER', '--notify-format', 'teams'], env: { SYNCAUTH_NOTIFY_SECRET: SECRET }, field: '--notify-format', says: 'must be one of' },
  ])('refuses $what with exit 2 naming $field, and sends nothing', async ({ args, env, field, says }) => {
    const receiver = await startReceiver();
    const result = await runCli(['notify', 'test', ...args.map((arg) => (arg === 'RECEIVER' ? receiver.url : arg))], { env });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(field);
    expect(result.stderr).toContain(says);
    expect(result.stderr).not.toContain('not-a-whsec-secret-at-all');
    expect(receiver.received).toHaveLength(0);
  });

  it('refuses the secret as a flag without echoing it', async () => {
    const result = await runCli(['notify', 'test', '--notify-secret', SECRET]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('SYNCAUTH_NOTIFY_SECRET');
    expect(result.stderr).not.toContain(SECRET);
  });
});

describe('syncauth daemon --notify-url', () => {
  it('refuses a bad notify setting with exit 2 before anything starts', async () => {
    const receiver = await startReceiver();
    const result = await runCli(['daemon', '--once', '--notify-url', receiver.url, '--notify-url', 'ftp://example.com/'], {
      env: { SYNCAUTH_NOTIFY_SECRET: SECRET, SYNCAUTH_STORE: 'env', SYNCAUTH_APP_KEY: 'k', SYNCAUTH_APP_SECRET: 's', SYNCAUTH_REFRESH_TOKEN: 'r', SYNCAUTH_TOKEN_FILE: '/tmp/x' },
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--notify-url');
    expect(result.stderr).toContain('https');
    expect(receiver.received).toHaveLength(0);
    const missing = await runCli(['daemon', '--once', '--notify-url', receiver.url], {
      env: { SYNCAUTH_STORE: 'env', SYNCAUTH_APP_KEY: 'k', SYNCAUTH_APP_SECRET: 's', SYNCAUTH_REFRESH_TOKEN: 'r', SYNCAUTH_TOKEN_FILE: '/tmp/x' },
    });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('SYNCAUTH_NOTIFY_SECRET');
  });
});

describe('syncauth daemon --once --notify-url', () => {
  it('tells a revoked grant before it exits 4', async () => {
    const { emulator, obtainGrant } = await import('../daemon/helpers.js');
    const { containerEnv } = await import('../daemon/process.js');
    const { tempDir } = await import('../helpers/cli.js');
    const emu = await emulator({ tokenLifetimeSeconds: 3600 });
    const grant = await obtainGrant(emu);
    emu.revokeGrant(grant.refreshToken);
    const receiver = await startReceiver();
    const home = tempDir();
    const env = { ...containerEnv(emu, grant, home, { profile: 'docs' }), SYNCAUTH_NOTIFY_SECRET: SECRET };
    const result = await runCli(['daemon', '--once', '--notify-url', receiver.url], { env, cwd: home });
    expect(result.code).toBe(4);
    expect(receiver.received).toHaveLength(1);
    expect(verify(receiver.received[0] as never)).toMatchObject({ type: 'profile.reauthorization_needed', data: { profile: 'docs', errorCode: 'OAUTH_INVALID_GRANT' } });
  });

  it('refuses a bad --notify-connector-failing-after with exit 2 naming it', async () => {
    const result = await runCli(['daemon', '--once', '--notify-connector-failing-after', '0'], {
      env: { SYNCAUTH_STORE: 'env', SYNCAUTH_APP_KEY: 'k', SYNCAUTH_APP_SECRET: 's', SYNCAUTH_REFRESH_TOKEN: 'r', SYNCAUTH_TOKEN_FILE: '/tmp/x' },
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--notify-connector-failing-after');
  });
});
