// Redaction, configured once in src/log.ts: whatever a caller logs, secrets come out as [redacted]; and a
// daemon run through failures of every kind, at debug level, leaves no canary secret in its log lines.
import { describe, expect, it } from 'vitest';
import { DEFAULT_APP } from '../../src/emulator/index.js';
import { REDACTED, createLogger } from '../../src/log.js';
import { OAuthError } from '../../src/oauth/index.js';
import { ServiceError } from '../../src/service/index.js';
import { captureLog, drive, startWorld } from './helpers.js';

const CANARY = 'CANARY7f3a9d';

describe('the logger', () => {
  it('redacts secret fields, headers, configs, bodies and form fields wherever they sit', () => {
    const lines: string[] = [];
    const log = createLogger({ destination: { write: (l: string) => void lines.push(l) }, secretHeaders: ['X-Workspace-Key'] });
    log.info(
      {
        headers: { authorization: `Bearer ${CANARY}-1`, 'service-api-key': `${CANARY}-2`, 'x-workspace-key': `${CANARY}-3`, accept: 'application/json' },
        request: { headers: { 'unstructured-api-key': `${CANARY}-4` }, form: { refresh_token: `${CANARY}-5`, client_secret: `${CANARY}-6` } },
        config: { remote_url: 'dropbox://data', app_secret: `${CANARY}-7`, token: `${CANARY}-8` },
        connector: { config: { refresh_token: `${CANARY}-9` } },
        grant: { appKey: `${CANARY}-10`, appSecret: `${CANARY}-11`, refreshToken: `${CANARY}-12` },
        access_token: `${CANARY}-13`,
        apiKey: `${CANARY}-14`,
        code: `${CANARY}-15`,
        body: `refresh_token=${CANARY}-16`,
        profile: 'docs',
      },
      'request sent',
    );
    const error = new OAuthError('OAUTH_INVALID_GRANT', 'Dropbox no longer accepts the refresh token', { body: { refresh_token: `${CANARY}-17` } });
    log.error({ err: error, profile: 'docs' }, 'renewal failed');
    const serviceError = new ServiceError('SERVICE_UNAUTHORIZED', 'API key missing', { status: 401, body: { key: `${CANARY}-18` } });
    log.warn({ err: serviceError }, 'reconcile failed');

    const text = lines.join('');
    expect(text).not.toContain(CANARY);
    const first = JSON.parse(lines[0] as string) as Record<string, Record<string, unknown>>;
    expect(first.headers).toEqual({ authorization: REDACTED, 'service-api-key': REDACTED, 'x-workspace-key': REDACTED, accept: 'application/json' });
    expect(first.config).toBe(REDACTED);
    expect(first.profile).toBe('docs');
    // Our own error codes stay readable.
    const second = JSON.parse(lines[1] as string) as { err: { code: string; kind: string } };
    expect(second.err).toMatchObject({ code: 'OAUTH_INVALID_GRANT', kind: 'terminal' });
  });

  it('prints one short line per record on a terminal, redacted the same way', () => {
    const out: string[] = [];
    const log = createLogger({ pretty: true, destination: { write: (l: string) => void out.push(l) } });
    log.warn({ profile: 'docs', refresh_token: CANARY }, 'could not renew');
    expect(out).toHaveLength(1);
    expect(out[0]).toMatch(/^\d\d:\d\d:\d\d WARN {2}could not renew {2}profile=docs refresh_token=\[redacted\]\n$/);
  });
});

describe('a daemon run', () => {
  it('logs no secret, through renewals, rate limits, server errors, service failures and a revoked grant', async () => {
    const app = { ...DEFAULT_APP, appKey: `${CANARY}appkey`, appSecret: `${CANARY}appsecret` };
    const apiKey = `${CANARY}-service-key`;
    const log = captureLog('trace');
    const world = await startWorld({
      profiles: ['docs', 'sales'],
      reconcile: true,
      workflow: true,
      emulator: { apps: [app], workspaces: [{ name: 'default', apiKeys: [apiKey] }] },
      apiKey,
      daemon: { logger: log.logger },
    });
    await drive(world, 20, 1000);
    world.emu.setFaults([{ route: 'token', status: 429, retryAfterSeconds: 1, times: 2 }, { route: 'sources', status: 503, times: 3 }]);
    await drive(world, 20, 1000);
    world.emu.setFaults([{ route: 'token', status: 500, times: 2 }]);
    await drive(world, 20, 1000);
    world.emu.revokeGrant(world.grants.get('docs')?.refreshToken ?? '');
    await drive(world, 20, 1000);

    // Everything happened: renewals, reconciles with the canary key, warnings, the re-authorization error.
    expect(world.emu.state.requests.some((r) => r.route === 'sources' && r.status === 200)).toBe(true);
    const records = log.records();
    expect(records.some((r) => r.level === 40)).toBe(true);
    expect(records.some((r) => r.level === 50)).toBe(true);
    const secrets = [
      CANARY,
      ...[...world.grants.values()].map((g) => g.refreshToken),
      ...[...world.emu.state.accessTokens.keys()],
    ];
    const text = log.lines.join('');
    for (const secret of secrets) expect(text).not.toContain(secret);

    // Every line says what happened (a stable event name), in which operation, and for which profile when it is
    // about one: `grep '"profile":"docs"'` gives an operator one profile's whole history.
    const unnamed = records.filter((r) => typeof r.event !== 'string' || !/^[a-z_]+\.[a-z_]+$/.test(r.event) || typeof r.op !== 'string');
    expect(unnamed.map((r) => r.msg)).toEqual([]);
    const aboutAProfile = records.filter((r) => /profile "(docs|sales)"/.test(String(r.msg)));
    expect(aboutAProfile.length).toBeGreaterThan(10);
    for (const record of aboutAProfile) expect(String(record.msg)).toContain(`profile "${String(record.profile)}"`);
    const events = new Set(records.map((r) => r.event));
    for (const event of ['renewal.succeeded', 'renewal.failed', 'reconcile.created', 'reconcile.failed', 'profile.reauthorization_needed']) {
      expect(events).toContain(event);
    }
  });
});
