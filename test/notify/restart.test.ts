// Notices survive a restart: the real `syncauth daemon` (a container's env-store profile against the
// emulator) sees its grant revoked while the webhook receiver is down, queues the notice in its outbox, and is
// killed (-9) before it could deliver; the receiver comes back, the daemon is started again, and the receiver
// gets the notice once, with a signature the reference library accepts. Nothing secret in any body, header or
// log line on the way.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { containerEnv, spawnDaemon } from '../daemon/process.js';
import { emulator, obtainGrant, tempDir } from '../daemon/helpers.js';
import { waitFor } from '../helpers/wait.js';
import { startReceiver } from './receiver.js';

const SECRET = `whsec_${Buffer.from('restart-test-secret-32-bytes-abc').toString('base64')}`;

describe('notices across a restart of the daemon', () => {
  it('notices queued while the receiver is down are delivered once each after kill -9 and a restart', async () => {
    const emu = await emulator({ tokenLifetimeSeconds: 10 });
    const grant = await obtainGrant(emu);
    const home = tempDir('syncauth-notify-restart-');
    const receiver = await startReceiver();
    await receiver.stop();
    const env: Record<string, string> = {
      ...containerEnv(emu, grant, home, { profile: 'docs' }),
      SYNCAUTH_TOKEN_FILE: path.join(home, 'token'),
      SYNCAUTH_RENEW_MARGIN: '4',
      SYNCAUTH_NOTIFY_SECRET: SECRET,
      SYNCAUTH_LOG_LEVEL: 'debug',
    };
    const args = ['--sweep', '* * * * * *', '--notify-url', receiver.url];
    const first = spawnDaemon(env, home, args);
    let second: ReturnType<typeof spawnDaemon> | undefined;
    try {
      const { listen } = await first.started();
      await first.ready(listen);
      // Dropbox's token endpoint fails: no live token for longer than the margin. This notice lives only in the
      // outbox: a restarted daemon that renews at once has no reason to send it again.
      emu.setFaults([{ route: 'token', status: 503 }]);
      const retried = (type: string): true | undefined =>
        first.out.stdout.split('\n').some((line) => line.includes('"event":"notify.retry"') && line.includes(`"type":"${type}"`)) ? true : undefined;
      await waitFor('a failed delivery of token.unavailable', () => retried('token.unavailable'), 30_000);
      // Then the grant is revoked: parked at the next renewal, and that notice fails to go too.
      emu.revokeGrant(grant.refreshToken);
      emu.setFaults([]);
      await waitFor('a failed delivery of profile.reauthorization_needed', () => retried('profile.reauthorization_needed'), 30_000);
      const outbox = path.join(home, 'config', 'notices.json');
      expect(existsSync(outbox)).toBe(true);
      // Both wait, their payloads sealed (under a subkey of the notify secret's key, which the file does not hold).
      const pending = JSON.parse(readFileSync(outbox, 'utf8')) as { version: number; deliveries: { payload?: unknown; sealed?: unknown }[] };
      expect(pending.version).toBe(2);
      expect(pending.deliveries.map((d) => [d.payload, typeof d.sealed])).toEqual([[undefined, 'object'], [undefined, 'object']]);
      first.child.kill('SIGKILL');
      await first.exited;

      await receiver.start();
      second = spawnDaemon(env, home, args);
      await second.started();
      await waitFor('both notices', () => (receiver.deliveredIds().size >= 2 ? true : undefined), 30_000);
      // Time for a duplicate to show up, if one were coming (the restarted daemon sees the same parked profile).
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      expect(receiver.received).toHaveLength(2);
      const payloads = receiver.received.map((request) =>
        new Webhook(SECRET).verify(request.body, {
          'webhook-id': String(request.headers['webhook-id']),
          'webhook-timestamp': String(request.headers['webhook-timestamp']),
          'webhook-signature': String(request.headers['webhook-signature']),
        }) as { type: string },
      );
      expect(payloads.map((p) => p.type).sort()).toEqual(['profile.reauthorization_needed', 'token.unavailable']);
      expect(payloads.find((p) => p.type === 'profile.reauthorization_needed')).toMatchObject({ data: { profile: 'docs', folder: 'dropbox://data', errorCode: 'OAUTH_INVALID_GRANT', ask: 1 } });
      expect(payloads.find((p) => p.type === 'token.unavailable')).toMatchObject({ data: { profile: 'docs', folder: 'dropbox://data' } });
      second.child.kill('SIGTERM');
      await second.exited;

      // The canary: no secret of the profile, nor any access token the emulator issued, nor the signing secret
      // in anything the notices carried or the daemon logged.
      const secrets = [grant.appKey, grant.appSecret, grant.refreshToken, env.SYNCAUTH_API_KEY, SECRET, SECRET.slice('whsec_'.length), ...[...emu.state.accessTokens.keys()]];
      const seen = [
        ...receiver.received.flatMap((r) => [r.body, JSON.stringify(r.headers)]),
        first.out.stdout, first.out.stderr, second.out.stdout, second.out.stderr,
        readFileSync(outbox, 'utf8'),
      ].join('\n');
      expect(emu.state.accessTokens.size).toBeGreaterThan(0);
      for (const secret of secrets) {
        expect(secret && secret.length > 8).toBe(true);
        expect(seen.includes(secret as string)).toBe(false);
      }
    } finally {
      if (first.child.exitCode === null) first.child.kill('SIGKILL');
      if (second && second.child.exitCode === null) second.child.kill('SIGKILL');
    }
  });
});
