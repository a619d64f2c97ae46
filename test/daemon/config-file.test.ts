// `syncauth daemon --config FILE`: the file is checked whole, each problem named by its line and key; a file
// another user could have written is refused; flags and variables win over it (logged); SIGHUP reads it
// again, rejecting a bad file (the daemon runs on as it was) and applying a good one's profiles at once.
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONFIG_KEYS, parseDaemonConfig, readDaemonConfig } from '../../src/daemon/config-file.js';
import { ValidationError } from '../../src/errors.js';
import { freePort, grantRefreshToken, newHome, onboardingEnv, runCli, startOnboarding, type Home, type Onboarding } from '../helpers/onboarding.js';
import { waitFor } from '../helpers/wait.js';
import { prepareProfileSinks } from '../../src/daemon/sink-plan.js';
import { captureLog, tempDir } from './helpers.js';
import { spawnDaemon } from './process.js';
import { startReceiver } from '../notify/receiver.js';

function issuesOf(text: string, file = '/etc/syncauth/syncauth.yaml'): string[] {
  try {
    parseDaemonConfig(text, file);
  } catch (error) {
    if (error instanceof ValidationError) return error.issues.map((issue) => `${issue.field}: ${issue.message}`);
    throw error;
  }
  return [];
}

const GOOD = `version: 1
profiles:
  docs:
  reports: {}
sinks:
  token_file: {path: "/run/syncauth/{profile}.token", mode: "0640", group: 0}
  templates:
    - {source: /etc/syncauth/rclone.conf.tmpl, dest: "/run/syncauth/rclone-{profile}.conf"}
  socket: {path: /run/syncauth/token.sock, mode: "0660"}
daemon:
  listen: 127.0.0.1:9464
  renew_margin: 900
  sweep: "* * * * *"
  redis_url: redis://127.0.0.1:6379
  concurrency: 16
  max_renewals_per_second: 2.5
  shutdown_timeout: 10
  log_level: info
`;

describe('the configuration file, parsed and checked', () => {
  it('takes every key of a good file, in YAML and in JSON', () => {
    const config = parseDaemonConfig(GOOD, '/etc/syncauth/syncauth.yaml');
    expect(config.profiles).toEqual(['docs', 'reports']);
    expect(config.sinks.token_file).toEqual({ path: '/run/syncauth/{profile}.token', mode: '0640', group: '0' });
    expect(config.sinks.templates?.[0]?.dest).toBe('/run/syncauth/rclone-{profile}.conf');
    expect(config.daemon).toMatchObject({ listen: '127.0.0.1:9464', concurrency: 16, max_renewals_per_second: 2.5, log_level: 'info' });
    expect(config.where('daemon.concurrency')).toBe('/etc/syncauth/syncauth.yaml line 15: daemon.concurrency');
    const json = parseDaemonConfig(JSON.stringify({ version: 1, profiles: ['docs'], daemon: { listen: '0.0.0.0:9464' } }), '/x.json');
    expect(json.profiles).toEqual(['docs']);
    expect(json.daemon.listen).toBe('0.0.0.0:9464');
  });

  it('names every problem at once by its line and key', () => {
    const bad = GOOD.replace('concurrency: 16', 'concurrency: many')
      .replace('mode: "0640"', 'mode: 0640')
      .replace('listen: 127.0.0.1:9464', 'listen: example.com:9464')
      .replace('  log_level: info', '  log_level: info\n  colour: blue')
      .replace('  reports: {}', '  "../etc": {}');
    const issues = issuesOf(bad);
    expect(issues).toEqual(expect.arrayContaining([
      expect.stringMatching(/^\/etc\/syncauth\/syncauth\.yaml line 4: profiles\.\.\.\/etc: /),
      expect.stringMatching(/line 6: sinks\.token_file\.mode: write the mode as a quoted string/),
      expect.stringMatching(/line 15: daemon\.concurrency: must be a whole number from 1 to 1000/),
      expect.stringMatching(/line 19: daemon\.colour: is not a key of this file/),
    ]));
    // The value checks (the same as the flags') run once the shape is right, and name their line too.
    expect(issuesOf(GOOD.replace('listen: 127.0.0.1:9464', 'listen: example.com:9464').replace('sweep: "* * * * *"', 'sweep: "every minute"').replace('mode: "0660"', 'mode: "0666"'))).toEqual([
      expect.stringMatching(/line 11: daemon\.listen: must be an IP address and port/),
      expect.stringMatching(/line 13: daemon\.sweep: is not a valid cron expression/),
      expect.stringMatching(/line 9: sinks\.socket\.mode: 0666 lets every local user fetch the token/),
    ]);
  });

  it('names a syntax error, a wrong version, a relative path and a duplicated key by line', () => {
    expect(issuesOf('version: 1\ndaemon:\n  listen: [unclosed\n')).toEqual([expect.stringMatching(/line \d: \(syntax\): /)]);
    expect(issuesOf('version: 1\nprofiles:\n  docs: {token_file: x}\n')).toEqual([expect.stringMatching(/line 3: profiles\.docs\.token_file: is not a key of this file/)]);
    expect(issuesOf('version: 1\nprofiles: [docs, "a b"]\n')).toEqual([expect.stringMatching(/line 2: profiles\[1\]: must be 1-64/)]);
    expect(issuesOf('version: 1\nprofiles: []\n')).toEqual([expect.stringMatching(/line 2: profiles: names no profile; leave the key out/)]);
    expect(issuesOf('version: 1\nprofiles:\n')).toEqual([expect.stringMatching(/line 2: profiles: must be a list of profile names/)]);
    const laughs = ['version: 1', 'a: &a [x, x, x, x, x, x, x, x, x, x]', ...Array.from({ length: 8 }, (_, i) => `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [${Array(10).fill(`*${String.fromCharCode(97 + i)}`).join(', ')}]`)].join('\n');
    expect(issuesOf(laughs)).toEqual([expect.stringMatching(/line 1: \(syntax\): .*alias/i)]);
    expect(issuesOf('version: 2\n')).toEqual([expect.stringMatching(/line 1: version: must be 1/)]);
    expect(issuesOf('version: 1\nsinks:\n  token_file:\n    path: run/token\n')).toEqual([expect.stringMatching(/line 4: sinks\.token_file\.path: must be an absolute path/)]);
    expect(issuesOf('version: 1\ndaemon:\n  concurrency: 2\n  concurrency: 3\n')).toEqual([expect.stringMatching(/line 4: \(syntax\): .*unique/i)]);
    expect(issuesOf('{"version": 1, "daemon": {"concurrency": 0}}')).toEqual([expect.stringMatching(/line 1: daemon\.concurrency: /)]);
  });
});

describe('a mistyped key or value in the file gets what the same mistake in a flag gets', () => {
  it('a misspelled key: "did you mean", with its line; a key too far from any gets none', () => {
    const text = 'version: 1\nprofiles: [docs]\ndaemon:\n  concurency: 4\n  log_levle: debug\n  colour: blue\nsinks:\n  token_file: {path: /run/t, mdoe: "0640"}\n';
    expect(issuesOf(text).sort()).toEqual([
      '/etc/syncauth/syncauth.yaml line 4: daemon.concurency: is not a key of this file; did you mean daemon.concurrency? (see deploy/syncauth.yaml)',
      '/etc/syncauth/syncauth.yaml line 5: daemon.log_levle: is not a key of this file; did you mean daemon.log_level? (see deploy/syncauth.yaml)',
      '/etc/syncauth/syncauth.yaml line 6: daemon.colour: is not a key of this file (see deploy/syncauth.yaml)',
      '/etc/syncauth/syncauth.yaml line 8: sinks.token_file.mdoe: is not a key of this file; did you mean sinks.token_file.mode? (see deploy/syncauth.yaml)',
    ]);
    expect(issuesOf('version: 1\nprofiles:\n  docs:\n    sink: {}\n')).toEqual([expect.stringMatching(/line 4: profiles\.docs\.sink: is not a key of this file; did you mean profiles\.docs\.sinks\?/)]);
    expect(issuesOf('version: 1\ndeamon: {}\n')).toEqual([expect.stringMatching(/line 2: deamon: is not a key of this file; did you mean daemon\?/)]);
  });

  it('a number written as text: the flag\'s rule, not the parser\'s "expected number, received string"', async () => {
    const margin = issuesOf('version: 1\ndaemon:\n  renew_margin: "15m"\n');
    expect(margin).toEqual(['/etc/syncauth/syncauth.yaml line 3: daemon.renew_margin: must be a whole number from 1 to 14399']);
    for (const [key, value] of [['concurrency', '0'], ['concurrency', 'many'], ['max_renewals_per_second', '"fast"'], ['shutdown_timeout', '1.5'], ['notify_connector_failing_after', '"1h"']]) {
      expect(issuesOf(`version: 1\ndaemon:\n  ${key}: ${value}\n`).join('\n')).not.toMatch(/expected|received|Too (big|small)|Invalid/);
    }
  });

  it('as the person meets them: `daemon --config` says of the key what the flag says of the option', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'syncauth.yaml');
    writeFileSync(file, 'version: 1\ndaemon:\n  concurency: 4\n  log_levle: debug\n  renew_margin: "15m"\n', { mode: 0o600 });
    const env = { SYNCAUTH_CONFIG_DIR: path.join(dir, 'config') };
    const fromFile = await runCli(['daemon', '--config', file], { env, cwd: dir });
    expect(fromFile.code).toBe(2);
    expect(fromFile.stderr).toContain('daemon.concurency: is not a key of this file; did you mean daemon.concurrency?');
    expect(fromFile.stderr).toContain('daemon.log_levle: is not a key of this file; did you mean daemon.log_level?');
    const rule = /--renew-margin: (.*)/.exec((await runCli(['daemon', '--renew-margin', '15m'], { env, cwd: dir })).stderr)?.[1];
    expect(rule).toBeDefined();
    expect(fromFile.stderr).toContain(`daemon.renew_margin: ${rule as string}`);
    expect((await runCli(['daemon', '--concurency', '4'], { env, cwd: dir })).stderr).toMatch(/Did you mean --concurrency\?/);
  });
});

const NOTICES = `version: 1
daemon:
  notify_urls:
    - https://hooks.example.com/syncauth
    - https://chat.example.com/hook
  notify_format: slack
  notify_connector_failing_after: 1800
  reauth_listen: 127.0.0.1:8443
  public_url: https://syncauth.example.com
  reauth_link_ttl: 48h
`;

describe('the settings of notices and the re-authorization page in the file', () => {
  it('takes the notify URLs (a list), format and threshold, and the page\'s listen address, public URL and link lifetime', () => {
    const config = parseDaemonConfig(NOTICES, '/etc/syncauth/syncauth.yaml');
    expect(config.daemon).toEqual({
      notify_urls: ['https://hooks.example.com/syncauth', 'https://chat.example.com/hook'],
      notify_format: 'slack',
      notify_connector_failing_after: 1800,
      reauth_listen: '127.0.0.1:8443',
      public_url: 'https://syncauth.example.com',
      reauth_link_ttl: '48h',
    });
    expect(parseDaemonConfig(NOTICES.replace('48h', '3600'), '/x.yaml').daemon.reauth_link_ttl).toBe(3600);
  });

  it('names each bad value by its line and key, with the same checks as the flags', () => {
    const bad = NOTICES.replace('https://chat.example.com/hook', 'ftp://chat.example.com/hook')
      .replace('notify_format: slack', 'notify_format: teams')
      .replace('1800', '-5')
      .replace('127.0.0.1:8443', 'nowhere')
      .replace('https://syncauth.example.com', 'http://syncauth.example.com')
      .replace('48h', '10s');
    expect(issuesOf(bad)).toEqual([
      expect.stringMatching(/line 7: daemon\.notify_connector_failing_after: /),
    ]);
    expect(issuesOf(bad.replace('-5', '60'))).toEqual([
      expect.stringMatching(/line 5: daemon\.notify_urls\[1\]: /),
      expect.stringMatching(/line 6: daemon\.notify_format: must be one of: standard, slack/),
      expect.stringMatching(/line 8: daemon\.reauth_listen: /),
      expect.stringMatching(/line 9: daemon\.public_url: must be https/),
      expect.stringMatching(/line 10: daemon\.reauth_link_ttl: must be a duration from 1m to 30d/),
    ]);
    expect(issuesOf('version: 1\ndaemon:\n  notify_urls: []\n')).toEqual([expect.stringMatching(/line 3: daemon\.notify_urls: names no URL/)]);
    expect(issuesOf('version: 1\ndaemon:\n  notify_urls: https://one.example.com/hook\n')).toEqual([expect.stringMatching(/line 3: daemon\.notify_urls: .*expected array/)]);
  });

  it('refuses a secret, naming the variable that takes it, and never repeats its value', () => {
    const secret = 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0';
    const issues = issuesOf(`${NOTICES}  notify_secret: ${secret}\nstore_key: abcdefghijklmnop\n`);
    expect(issues).toEqual([
      expect.stringMatching(/line 12: store_key: is a secret, and secrets are never read from this file: set SYNCAUTH_STORE_KEY in the daemon's environment/),
      expect.stringMatching(/line 11: daemon\.notify_secret: is a secret, and secrets are never read from this file: set SYNCAUTH_NOTIFY_SECRET in the daemon's environment/),
    ]);
    expect(issues.join('\n')).not.toContain(secret);
    expect(issuesOf('version: 1\ndaemon:\n  redis_password: hunter2hunter2\n')).toEqual([expect.stringMatching(/line 3: daemon\.redis_password: looks like a secret/)]);
    expect(issuesOf('version: 1\ndaemon:\n  grant_key: x\n')).toEqual([expect.stringMatching(/line 3: daemon\.grant_key: .*set SYNCAUTH_GRANT_KEY/)]);
  });
});

describe("a profile's own sinks", () => {
  const OWN = `version: 1
profiles:
  docs:
  "reports.eu":
    sinks:
      token_file: {path: /run/reports/token, mode: "0640", group: 0}
      templates:
        - {source: /etc/syncauth/env.tmpl, dest: "/run/reports/{profile}.env", mode: "0600"}
`;

  it('takes a token file and templates per profile, keyed by a name that may hold a dot', () => {
    const config = parseDaemonConfig(OWN, '/etc/s.yaml');
    expect(config.profiles).toEqual(['docs', 'reports.eu']);
    expect(config.profileSinks).toEqual({
      'reports.eu': {
        token_file: { path: '/run/reports/token', mode: '0640', group: '0' },
        templates: [{ source: '/etc/syncauth/env.tmpl', dest: '/run/reports/{profile}.env', mode: '0600' }],
      },
    });
    expect(config.where(['profiles', 'reports.eu', 'sinks', 'token_file', 'mode'])).toBe('/etc/s.yaml line 6: profiles.reports.eu.sinks.token_file.mode');
  });

  it('names each problem of an own sink by its line and key, and refuses a socket per profile', () => {
    const bad = OWN.replace('mode: "0640"', 'mode: "0666"')
      .replace('dest: "/run/reports/{profile}.env"', 'dest: run/reports.env')
      .replace('      templates:', '      socket: {path: /run/reports.sock}\n      colour: blue\n      templates:');
    expect(issuesOf(bad, '/etc/s.yaml')).toEqual(expect.arrayContaining([
      expect.stringMatching(/^\/etc\/s\.yaml line 7: profiles\.reports\.eu\.sinks\.socket: the one socket \(sinks\.socket\) serves every profile/),
      expect.stringMatching(/^\/etc\/s\.yaml line 8: profiles\.reports\.eu\.sinks\.colour: is not a key of this file/),
      expect.stringMatching(/^\/etc\/s\.yaml line 10: profiles\.reports\.eu\.sinks\.templates\[0\]\.dest: must be an absolute path/),
    ]));
    // The value checks (the same as the flags') name the own sink's line too.
    expect(issuesOf(OWN.replace('mode: "0640"', 'mode: "0666"'), '/etc/s.yaml')).toEqual([
      expect.stringMatching(/^\/etc\/s\.yaml line 6: profiles\.reports\.eu\.sinks\.token_file\.mode: /),
    ]);
  });

  it("checks an own token file's group exists", async () => {
    const dir = tempDir('syncauth-config-');
    const file = path.join(dir, 'syncauth.yaml');
    writeFileSync(file, OWN.replace('group: 0', 'group: no-such-group-here'), { mode: 0o600 });
    await expect(readDaemonConfig(file)).rejects.toThrow(/line 6: profiles\.reports\.eu\.sinks\.token_file\.group/);
  });
});

describe("a profile's own sinks, prepared for the daemon", () => {
  it('are checked and placed whole: a token file taken twice and a template that cannot render are each named by line', async () => {
    const dir = tempDir('syncauth-own-sinks-');
    writeFileSync(path.join(dir, 'ok.tmpl'), 'T={{ access_token }}\n');
    const text = (bTokenFile: string, source = 'ok.tmpl') => `version: 1
profiles:
  a:
    sinks:
      token_file: {path: "${dir}/{profile}.token"}
  b:
    sinks:
      token_file: {path: "${bTokenFile}", mode: "0640"}
      templates:
        - {source: ${dir}/${source}, dest: "${dir}/{profile}.env"}
  c:
`;
    const { logger } = captureLog();
    const shared = (name: string) => `${dir}/${name}.shared`;
    const good = await prepareProfileSinks(parseDaemonConfig(text(`${dir}/b.token`), '/s.yaml'), ['a', 'b', 'c'], logger, shared);
    expect(good.get('a')).toEqual({ tokenFile: `${dir}/a.token`, tokenFileAccess: { mode: 0o600 } });
    expect(good.get('b')).toEqual({ tokenFile: `${dir}/b.token`, tokenFileAccess: { mode: 0o640 }, templates: [{ source: `${dir}/ok.tmpl`, dest: `${dir}/b.env`, mode: 0o600 }] });
    expect(good.has('c')).toBe(false);

    const issues = async (config: string): Promise<string[]> =>
      prepareProfileSinks(parseDaemonConfig(config, '/s.yaml'), ['a', 'b', 'c'], logger, shared).then(
        () => [],
        (error: unknown) => (error as ValidationError).issues.map((issue) => `${issue.field}: ${issue.message}`),
      );
    expect(await issues(text(`${dir}/a.token`, 'missing.tmpl'))).toEqual([
      `/s.yaml line 8: profiles.b.sinks.token_file.path: ${dir}/a.token is already the token file of profile "a"`,
      expect.stringMatching(/^\/s\.yaml line 10: profiles\.b\.sinks\.templates\[0\]: cannot read template .*missing\.tmpl/),
    ]);
    // Nor may an own token file take the one the daemon-wide token file gives a profile without its own.
    expect(await issues(text(`${dir}/c.shared`))).toEqual([`/s.yaml line 8: profiles.b.sinks.token_file.path: ${dir}/c.shared is already the token file of profile "c"`]);
  });
});

describe('the example in deploy/', () => {
  it('is a valid file that shows every key the daemon knows, each with a comment', () => {
    const text = readFileSync(path.join(__dirname, '../../deploy/syncauth.yaml'), 'utf8');
    const config = parseDaemonConfig(text, 'deploy/syncauth.yaml');
    expect(config.profiles).toEqual(['docs', 'reports']);
    // A profile with its own sinks is shown: its keys are documented under profiles.<name>.
    expect(Object.keys(config.profileSinks)).toEqual(['reports']);
    const shown = new Set<string>();
    const walk = (value: unknown, at: string): void => {
      if (Array.isArray(value)) value.forEach((item) => walk(item, at));
      else if (value !== null && typeof value === 'object') {
        for (const [key, inner] of Object.entries(value)) {
          const next = at === 'profiles' ? 'profiles.<name>' : at ? `${at}.${key}` : key;
          shown.add(next);
          walk(inner, next);
        }
      }
    };
    walk(parseYaml(text), '');
    expect([...shown].sort()).toEqual([...CONFIG_KEYS].sort());
    // Each key's line, or a line above it in its block, is a comment.
    const lines = text.split('\n');
    for (const key of CONFIG_KEYS.filter((k) => !/\.(path|mode|group|source|dest)$/.test(k))) {
      const line = Number(/line (\d+)/.exec(config.where(key.replace('sinks.templates.', 'sinks.templates.0.').replace('<name>', 'reports')))?.[1]);
      expect(lines[line - 2]?.trim().startsWith('#') || lines[line - 1]?.includes('#'), key).toBe(true);
    }
  });
});

describe('reading the configuration file', () => {
  it('refuses a file its group or others may write, one owned by another user, and a FIFO', async () => {
    const dir = tempDir('syncauth-config-');
    const file = path.join(dir, 'syncauth.yaml');
    writeFileSync(file, 'version: 1\n', { mode: 0o600 });
    await expect(readDaemonConfig(file)).resolves.toMatchObject({ file });
    chmodSync(file, 0o620);
    await expect(readDaemonConfig(file)).rejects.toThrow(/writable by its group or by others \(0620\)/);
    chmodSync(file, 0o600);
    chownSync(file, 65534, 65534);
    await expect(readDaemonConfig(file)).rejects.toThrow(/belongs to uid 65534/);
    chownSync(file, 0, 0);
    chmodSync(dir, 0o777);
    await expect(readDaemonConfig(file)).rejects.toThrow(/which its group or others may write/);
    chmodSync(dir, 0o700);
    await expect(readDaemonConfig(path.join(dir, 'absent.yaml'))).rejects.toThrow(/--config: .*absent\.yaml does not exist/);
    const { execFileSync } = await import('node:child_process');
    execFileSync('mkfifo', ['-m', '0600', path.join(dir, 'fifo.yaml')]);
    await expect(readDaemonConfig(path.join(dir, 'fifo.yaml'))).rejects.toThrow(/FIFO/);
  });

  it('checks that a group name exists', async () => {
    const dir = tempDir('syncauth-config-');
    const file = path.join(dir, 'syncauth.yaml');
    writeFileSync(file, 'version: 1\nsinks:\n  socket: {path: /run/s.sock, group: no-such-group-here}\n', { mode: 0o600 });
    await expect(readDaemonConfig(file)).rejects.toThrow(/line 3: sinks\.socket\.group/);
  });
});

describe('a daemon run with --config', () => {
  let ob: Onboarding;

  /** Profiles alpha and beta, each with its own grant and connector, made by `setup` as a person would. */
  async function setUpAlphaAndBeta(home: Home): Promise<void> {
    for (const profile of ['alpha', 'beta']) {
      const env = onboardingEnv(ob, home, { SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob), SYNCAUTH_PROFILE: profile });
      const setup = await runCli(['setup', '--yes', '--connector-name', `conn-${profile}`], { env, cwd: home.dir });
      expect(setup.code, setup.stderr).toBe(0);
    }
  }
  beforeAll(async () => {
    ob = await startOnboarding();
  });
  afterAll(async () => ob.emulator.close());

  it('refuses a bad file at start with exit 2, naming the line; a .env cannot name the file', async () => {
    const home = newHome();
    const file = path.join(home.dir, 'syncauth.yaml');
    writeFileSync(file, 'version: 1\ndaemon:\n  concurrency: 0\n', { mode: 0o600 });
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home.dir, SYNCAUTH_CONFIG_DIR: home.configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: home.storeKey };
    const run = await runCli(['daemon', '--config', file], { env, cwd: home.dir });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/syncauth\.yaml line 3: daemon\.concurrency/);
    // The same file named in a .env is not read: the daemon goes on to find no profile (exit 4), not exit 2.
    writeFileSync(path.join(home.dir, '.env'), `SYNCAUTH_DAEMON_CONFIG=${file}\n`);
    const fromDotenv = await runCli(['daemon', '--once'], { env, cwd: home.dir });
    expect(fromDotenv.stderr).not.toMatch(/daemon\.concurrency/);
    expect(fromDotenv.stderr).toMatch(/SYNCAUTH_DAEMON_CONFIG.*ignored|ignored.*SYNCAUTH_DAEMON_CONFIG/);
    expect(fromDotenv.code).toBe(4);
  }, 30_000);

  it('serves what the file says, flags winning; on SIGHUP rejects a bad file and applies a good one', async () => {
    const home = newHome();
    await setUpAlphaAndBeta(home);
    const out = path.join(home.dir, 'out');
    mkdirSync(out, { mode: 0o700 });
    const file = path.join(home.dir, 'syncauth.yaml');
    const config = (profiles: string, extra = ''): string => `version: 1
profiles: ${profiles}
sinks:
  token_file: {path: "${out}/{profile}.token", mode: "0640"}
daemon:
  listen: 127.0.0.1:0
  sweep: "* * * * *"
  renew_margin: 900${extra}
`;
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home.dir, SYNCAUTH_CONFIG_DIR: home.configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: home.storeKey };
    // A later check at start (the token file's directory) names the file's line and key too.
    writeFileSync(file, config('[alpha]').replace(`${out}/`, `${out}/missing/`), { mode: 0o600 });
    const refused = await runCli(['daemon', '--config', file], { env, cwd: home.dir });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/syncauth\.yaml line 4: sinks\.token_file\.path: the directory .*missing does not exist/);
    writeFileSync(file, config('[alpha]'), { mode: 0o600 });
    // A variable wins over the file too.
    Object.assign(env, { SYNCAUTH_RENEW_MARGIN: '600' });
    // spawnDaemon passes --sweep: it wins over the file's daemon.sweep.
    const daemon = spawnDaemon(env, home.dir, ['--config', file]);
    const lines = (event: string): Record<string, unknown>[] =>
      daemon.out.stdout.split('\n').filter((l) => l.includes(`"${event}"`)).map((l) => JSON.parse(l) as Record<string, unknown>);
    try {
      const { listen, profiles } = await daemon.started();
      expect(profiles).toEqual(['alpha']);
      expect(lines('daemon.config_overridden')).toEqual([
        expect.objectContaining({ key: 'daemon.renew_margin', winner: 'SYNCAUTH_RENEW_MARGIN' }),
        expect.objectContaining({ key: 'daemon.sweep', winner: '--sweep' }),
      ]);
      expect(lines('daemon.started')[0]).toMatchObject({ renewMarginSeconds: 600 });
      await waitFor('the token file', () => (existsSync(path.join(out, 'alpha.token')) ? true : undefined), 20_000);
      expect(statSync(path.join(out, 'alpha.token')).mode & 0o777).toBe(0o640);
      const served = async (): Promise<string[]> => Object.keys(((await (await fetch(`${listen}/readyz`)).json()) as { profiles: Record<string, unknown> }).profiles).sort();

      // A bad file: rejected whole (beta is not served although the file names it), the daemon runs on.
      writeFileSync(file, config('[alpha, beta]', '\n  concurrency: lots'));
      daemon.child.kill('SIGHUP');
      const rejected = await waitFor('the rejection', () => lines('daemon.config_rejected')[0]);
      expect(rejected.reason).toMatch(/syncauth\.yaml line 9: daemon\.concurrency/);
      expect(lines('daemon.reloaded')).toEqual([]);
      expect(await served()).toEqual(['alpha']);

      // A good file: its profiles are served at once; a changed daemon-wide setting waits for a restart.
      // (The file's sweep changes too, but --sweep overrides it: no restart would change anything.)
      writeFileSync(file, config('[alpha, beta]', '\n  concurrency: 8').replace('sweep: "* * * * *"', 'sweep: "*/2 * * * *"'));
      daemon.child.kill('SIGHUP');
      await waitFor('the reload', () => lines('daemon.reloaded')[0]);
      // One reload only: the rejected file caused none.
      expect(lines('daemon.reloaded')).toHaveLength(1);
      expect(lines('daemon.config_reloaded')).toEqual([expect.objectContaining({ profiles: ['alpha', 'beta'] })]);
      expect(lines('daemon.config_restart_needed')).toEqual([expect.objectContaining({ keys: ['daemon.concurrency'] })]);
      expect(await served()).toEqual(['alpha', 'beta']);
      await waitFor('the second token file', () => (existsSync(path.join(out, 'beta.token')) ? true : undefined), 20_000);
      expect(readFileSync(path.join(out, 'beta.token'), 'utf8').length).toBeGreaterThan(0);
    } finally {
      daemon.child.kill('SIGKILL');
    }
  }, 90_000);

  it("publishes each profile to its own sinks with its own modes; SIGHUP rejects a bad own sink whole and moves a good one", async () => {
    const home = newHome();
    await setUpAlphaAndBeta(home);
    const out = path.join(home.dir, 'out');
    for (const dir of [out, `${out}/a`, `${out}/b`, `${out}/c`]) mkdirSync(dir, { mode: 0o700 });
    // A directory every user may write, whose private subdirectory someone replaced with a link.
    const shared = path.join(out, 'shared');
    mkdirSync(shared, { mode: 0o777 });
    chmodSync(shared, 0o777);
    symlinkSync(`${out}/c`, path.join(shared, `syncauth-${process.geteuid?.() ?? 0}`));
    const tmpl = path.join(home.dir, 'env.tmpl');
    writeFileSync(tmpl, 'TOKEN={{ access_token }}\nPROFILE={{ profile }}\n', { mode: 0o600 });
    const file = path.join(home.dir, 'syncauth.yaml');
    const config = (betaToken: string): string => `version: 1
profiles:
  alpha:
    sinks:
      token_file: {path: "${out}/a/{profile}.token"}
  beta:
    sinks:
      token_file: {path: "${betaToken}", mode: "0640"}
      templates:
        - {source: ${tmpl}, dest: "${out}/b/{profile}.env", mode: "0604"}
sinks:
  token_file: {path: "${out}/{profile}.shared", mode: "0644"}
daemon:
  listen: 127.0.0.1:0
`;
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home.dir, SYNCAUTH_CONFIG_DIR: home.configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: home.storeKey };
    // The rule of shared directories holds for an own sink as for the daemon-wide ones: refused at start, by line.
    writeFileSync(file, config(`${shared}/beta.token`), { mode: 0o600 });
    const refused = await runCli(['daemon', '--config', file], { env, cwd: home.dir });
    expect(refused.code, refused.stderr).toBe(2);
    expect(refused.stderr).toMatch(/syncauth\.yaml line 8: profiles\.beta\.sinks\.token_file\.path: .*is a symbolic link/);

    writeFileSync(file, config(`${out}/b/beta.token`), { mode: 0o600 });
    const daemon = spawnDaemon(env, home.dir, ['--config', file]);
    const lines = (event: string): Record<string, unknown>[] =>
      daemon.out.stdout.split('\n').filter((l) => l.includes(`"${event}"`)).map((l) => JSON.parse(l) as Record<string, unknown>);
    const fileThere = (at: string) => waitFor(at, () => (existsSync(at) ? true : undefined), 20_000);
    try {
      const { listen } = await daemon.started();
      await daemon.ready(listen);
      // Each profile's own token file, with its own mode; the daemon-wide one serves neither.
      expect(statSync(`${out}/a/alpha.token`).mode & 0o777).toBe(0o600);
      expect(statSync(`${out}/b/beta.token`).mode & 0o777).toBe(0o640);
      expect(existsSync(`${out}/alpha.shared`) || existsSync(`${out}/beta.shared`)).toBe(false);
      const alphaToken = readFileSync(`${out}/a/alpha.token`, 'utf8');
      const betaToken = readFileSync(`${out}/b/beta.token`, 'utf8');
      expect(alphaToken).not.toBe(betaToken);
      // beta's own template, rendered with beta's token.
      await fileThere(`${out}/b/beta.env`);
      expect(readFileSync(`${out}/b/beta.env`, 'utf8')).toBe(`TOKEN=${betaToken}\nPROFILE=beta\n`);
      expect(statSync(`${out}/b/beta.env`).mode & 0o777).toBe(0o604);
      expect(existsSync(`${out}/a/alpha.env`)).toBe(false);

      // A bad own sink on SIGHUP: the whole file is rejected with the reason, and the old sinks stay as they were.
      writeFileSync(file, config(`${shared}/beta.token`).replace('listen: 127.0.0.1:0', 'listen: 127.0.0.1:0\n  concurrency: 8'));
      daemon.child.kill('SIGHUP');
      const rejected = await waitFor('the rejection', () => lines('daemon.config_rejected')[0]);
      expect(rejected.reason).toMatch(/syncauth\.yaml line 8: profiles\.beta\.sinks\.token_file\.path: .*is a symbolic link/);
      expect(lines('daemon.reloaded')).toEqual([]);
      expect(lines('daemon.config_restart_needed')).toEqual([]);
      expect(readFileSync(`${out}/b/beta.token`, 'utf8')).toBe(betaToken);
      expect(statSync(`${out}/b/beta.token`).mode & 0o777).toBe(0o640);
      expect(existsSync(`${out}/c/beta.token`)).toBe(false);
      expect((await fetch(`${listen}/readyz`)).status).toBe(200);

      // A good one: beta moves to its new token file at once, the old one goes; alpha is left as it was.
      writeFileSync(file, config(`${out}/c/beta.token`));
      daemon.child.kill('SIGHUP');
      await waitFor('the reload', () => lines('daemon.reloaded')[0]);
      await fileThere(`${out}/c/beta.token`);
      expect(statSync(`${out}/c/beta.token`).mode & 0o777).toBe(0o640);
      expect(existsSync(`${out}/b/beta.token`)).toBe(false);
      expect(readFileSync(`${out}/a/alpha.token`, 'utf8')).toBe(alphaToken);
    } finally {
      daemon.child.kill('SIGKILL');
    }
  }, 90_000);

  it('takes the notices and the page from the file, a variable winning; SIGHUP rejects a change to them whole', async () => {
    const home = newHome();
    await setUpAlphaAndBeta(home);
    const receiver = await startReceiver();
    const pagePort = await freePort();
    const file = path.join(home.dir, 'syncauth.yaml');
    const config = (profiles: string, publicUrl: string): string => `version: 1
profiles: ${profiles}
sinks:
  token_file: {path: "${home.dir}/{profile}.token"}
daemon:
  listen: 127.0.0.1:0
  notify_urls: [http://127.0.0.1:9/not-this-one]
  notify_format: standard
  notify_connector_failing_after: 120
  reauth_listen: 127.0.0.1:${pagePort}
  public_url: ${publicUrl}
  reauth_link_ttl: 2h
`;
    const env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: home.dir,
      SYNCAUTH_CONFIG_DIR: home.configDir,
      SYNCAUTH_STORE: 'file',
      SYNCAUTH_STORE_KEY: home.storeKey,
      SYNCAUTH_NOTIFY_SECRET: `whsec_${Buffer.from('config-file-test-secret-32-bytes').toString('base64')}`,
    };
    // The page needs both halves; the file's line names the half that is given.
    writeFileSync(file, config('[alpha]', 'https://x.example.com').replace(/\n {2}public_url: .*\n/, '\n'), { mode: 0o600 });
    const half = await runCli(['daemon', '--config', file], { env, cwd: home.dir });
    expect(half.code).toBe(2);
    expect(half.stderr).toMatch(/syncauth\.yaml line 10: daemon\.reauth_listen: needs a public URL/);
    // A secret in the file: exit 2 naming the variable, nothing started.
    writeFileSync(file, `${config('[alpha]', `http://127.0.0.1:${pagePort}`)}  notify_secret: whsec_bm90LWluLXRoZS1maWxlLXBsZWFzZQ==\n`);
    const secret = await runCli(['daemon', '--config', file], { env, cwd: home.dir });
    expect(secret.code).toBe(2);
    expect(secret.stderr).toMatch(/line 13: daemon\.notify_secret: is a secret.*SYNCAUTH_NOTIFY_SECRET/);
    expect(secret.stderr).not.toContain('bm90LWluLXRoZS1maWxlLXBsZWFzZQ');

    writeFileSync(file, config('[alpha]', `http://127.0.0.1:${pagePort}`));
    // SYNCAUTH_NOTIFY_URL wins over the file's notify_urls, as every variable does.
    const daemon = spawnDaemon({ ...env, SYNCAUTH_NOTIFY_URL: receiver.url }, home.dir, ['--config', file]);
    const lines = (event: string): Record<string, unknown>[] =>
      daemon.out.stdout.split('\n').filter((l) => l.includes(`"${event}"`)).map((l) => JSON.parse(l) as Record<string, unknown>);
    try {
      await daemon.started();
      expect(lines('daemon.config_overridden')).toEqual([expect.objectContaining({ key: 'daemon.notify_urls', winner: 'SYNCAUTH_NOTIFY_URL' })]);
      expect(lines('daemon.started')[0]).toMatchObject({ notify: [new URL(receiver.url).origin], notifyFormat: 'standard' });
      // The page listens where the file says, and knows its public URL (a wrong Host is refused like a wrong link).
      // (The page opens just after the start line.)
      const page = await waitFor('the page', () => fetch(`http://127.0.0.1:${pagePort}/reauthorize/${'A'.repeat(43)}`).catch(() => undefined), 10_000);
      expect(page.status).toBe(404);
      expect(page.headers.get('referrer-policy')).toBe('no-referrer');

      // A reload that changes the page's public URL (and adds a profile): rejected whole, with the reason.
      writeFileSync(file, config('[alpha, beta]', 'https://syncauth.example.com'));
      daemon.child.kill('SIGHUP');
      const rejected = await waitFor('the rejection', () => lines('daemon.config_rejected')[0]);
      expect(rejected).toMatchObject({ keys: ['daemon.public_url'] });
      expect(String(rejected.reason)).toMatch(/daemon\.public_url changed, and it is set up once at start: restart the daemon/);
      expect(lines('daemon.config_reloaded')).toEqual([]);
      expect(lines('daemon.reloaded')).toEqual([]);
      const listen = String(lines('daemon.started')[0]?.listen);
      const served = Object.keys(((await (await fetch(`${listen}/readyz`)).json()) as { profiles: Record<string, unknown> }).profiles);
      expect(served).toEqual(['alpha']);
      expect((await fetch(`http://127.0.0.1:${pagePort}/reauthorize/${'A'.repeat(43)}`)).status).toBe(404);

      // The same change without the page's key: applied.
      writeFileSync(file, config('[alpha, beta]', `http://127.0.0.1:${pagePort}`));
      daemon.child.kill('SIGHUP');
      await waitFor('the reload', () => lines('daemon.config_reloaded')[0]);
      expect(lines('daemon.config_rejected')).toHaveLength(1);
    } finally {
      daemon.child.kill('SIGKILL');
    }
  }, 90_000);
});
