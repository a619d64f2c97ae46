// The library's options and the start line's fields drawn from the daemon's settings, its checked options and
// its planned sinks (daemonOptionsOf, daemonStartedFields in src/daemon/spec.ts).
import { describe, expect, it } from 'vitest';
import { checkDaemonOptions, daemonOptionsOf, daemonStartedFields, type DaemonInputs } from '../../src/daemon/spec.js';
import type { FieldIssue } from '../../src/errors.js';

const values = { renewMargin: 300, sweep: '*/5 * * * *', listen: { host: '127.0.0.1', port: 9464 }, notifyConnectorFailingAfter: 900, redisUrl: undefined };
const noSinks = { templates: [], profileSinks: new Map() };

function checked(options: Parameters<typeof checkDaemonOptions>[1]) {
  const issues: FieldIssue[] = [];
  const result = checkDaemonOptions({}, options, (name) => name, issues);
  expect(issues).toEqual([]);
  return result;
}

describe("the daemon's options, as the library takes them", () => {
  it('maps each checked option and setting, defaults included, and the sinks', () => {
    const inputs: DaemonInputs = {
      values,
      checked: checked({ maxRenewalsPerSecond: '2.5', checkInterval: '90s', maxChecksPerSecond: '0.5', shutdownTimeout: '30' }),
      sinks: { tokenFile: '/run/t/{profile}', tokenFileAccess: { mode: 0o640 }, templates: [{ source: '/s', dest: '/d', mode: 0o600 }], profileSinks: new Map([['b', { tokenFile: '/run/b' }]]), socket: { path: '/run/s.sock' } },
      once: false,
    };
    expect(daemonOptionsOf(inputs)).toEqual({
      renewMarginMs: 300_000,
      schedule: '*/5 * * * *',
      sweepOnStart: true,
      concurrency: 4,
      maxRenewalsPerSecond: 2.5,
      checkIntervalMs: 90_000,
      maxChecksPerSecond: 0.5,
      tokenFile: '/run/t/{profile}',
      tokenFileAccess: { mode: 0o640 },
      templates: [{ source: '/s', dest: '/d', mode: 0o600 }],
      profileSinks: new Map([['b', { tokenFile: '/run/b' }]]),
      socket: { path: '/run/s.sock' },
      listen: { host: '127.0.0.1', port: 9464 },
      connectorFailingAfterMs: 900_000,
      shutdownTimeoutMs: 30_000,
    });
  });

  it('runs one pass with no schedule, listener or socket, and leaves out what was not given', () => {
    const options = daemonOptionsOf({ values, checked: checked({}), sinks: { ...noSinks, socket: { path: '/run/s.sock' } }, once: true });
    expect(options).toMatchObject({ schedule: false, sweepOnStart: false, concurrency: 4, shutdownTimeoutMs: 10_000 });
    for (const key of ['listen', 'socket', 'maxRenewalsPerSecond', 'checkIntervalMs', 'maxChecksPerSecond', 'tokenFile', 'templates', 'profileSinks']) expect(options).not.toHaveProperty(key);
  });
});

describe("the start line's fields", () => {
  it('say the settings, the token checks and the sinks, in order', () => {
    const inputs: DaemonInputs = {
      values: { ...values, redisUrl: 'redis://user:pw@127.0.0.1:6379/0' },
      checked: checked({ maxRenewalsPerSecond: '2' }),
      sinks: { tokenFile: '/run/t', templates: [{ source: '/s', dest: '/d', mode: 0o600 }], profileSinks: new Map([['b', { tokenFile: '/run/b' }]]), socket: { path: '/run/s.sock' } },
      once: false,
    };
    const running = { url: 'http://127.0.0.1:9464', status: () => ({ checks: { intervalSeconds: 900, maxPerSecond: 1, noticeWithinSeconds: 960 } }) };
    const fields = daemonStartedFields(inputs, running as never);
    expect(Object.keys(fields)).toEqual([
      'sweep', 'renewMarginSeconds', 'concurrency', 'maxRenewalsPerSecond', 'checkIntervalSeconds', 'maxChecksPerSecond', 'revocationNoticedWithinSeconds',
      'tokenFile', 'templates', 'profileSinks', 'socket', 'listen', 'redis',
    ]);
    expect(fields).toMatchObject({ renewMarginSeconds: 300, concurrency: 4, maxRenewalsPerSecond: 2, templates: ['/d'], profileSinks: { b: { tokenFile: '/run/b' } }, socket: '/run/s.sock', listen: 'http://127.0.0.1:9464' });
    expect(JSON.stringify(fields)).not.toContain('pw');
    const off = daemonStartedFields({ values, checked: checked({}), sinks: noSinks, once: false }, { url: undefined, status: () => ({}) } as never);
    expect(off).toEqual({ sweep: '*/5 * * * *', renewMarginSeconds: 300, concurrency: 4, checks: 'off' });
  });
});
