// What `syncauth exec` keeps out of its child's environment: every secret in every encoding redaction knows,
// also inside layers of encoding (base64 of base64, a base64 config blob, `Basic base64("api:KEY")`), and with
// --clean-env everything but PATH, HOME, LANG, TZ, the token variables and the --pass-env names.
import { describe, expect, it } from 'vitest';
import { DEFAULT_APP, type EmulatorApp } from '../../src/emulator/index.js';
import { childEnvironment, holdsSecret } from '../../src/exec/env.js';
import { runCli } from '../helpers/cli.js';
import { emulator, obtainGrant, tempDir } from '../daemon/helpers.js';
import { containerEnv } from '../daemon/process.js';
import { childCommand, dumpOf, startsIn } from './helpers.js';

const b64 = (text: string) => Buffer.from(text).toString('base64');
const b64url = (text: string) => Buffer.from(text).toString('base64url');
const hex = (text: string) => Buffer.from(text).toString('hex');

/** Every way the reports and the redaction know of to carry `secret` (named after `label`) in a variable. */
function encodings(label: string, secret: string): Record<string, string> {
  return {
    [`${label}_B64`]: b64(secret),
    [`${label}_B64URL`]: b64url(secret),
    [`${label}_HEX`]: hex(secret),
    [`${label}_HEX_UPPER`]: hex(secret).toUpperCase(),
    [`${label}_URL`]: `https://example.test/cb?x=${encodeURIComponent(secret)}&y=1`,
    [`${label}_FORM`]: new URLSearchParams({ a: 'b', s: secret }).toString(),
    [`${label}_JSON`]: JSON.stringify({ nested: { value: secret } }),
    [`${label}_BASIC`]: `Basic ${b64(`api:${secret}`)}`,
    [`${label}_B64_B64`]: b64(b64(secret)),
    [`${label}_B64_BLOB`]: b64(JSON.stringify({ kind: 'config', refresh_token: secret, note: 'x'.repeat(40) })),
    [`${label}_B64URL_OF_URL`]: b64url(`token=${encodeURIComponent(secret)}`),
    [`${label}_HEX_OF_B64`]: hex(b64(secret)),
    [`${label}_B64_OF_HEX_UPPER`]: b64(hex(secret).toUpperCase()),
    [`${label}_PREFIXED_B64URL`]: `v1-${b64url(`salt:${secret}`)}`,
  };
}

/** What a search of the child's environment looks for: each canary as is and in every encoding. */
function spellings(secret: string): string[] {
  return [secret, encodeURIComponent(secret), b64(secret), b64url(secret), hex(secret), hex(secret).toUpperCase()];
}

const TOKEN = { accessToken: 'sl.child-token', expiresAt: Date.parse('2030-01-01T00:00:00Z') };

describe('the environment of the child of syncauth exec', () => {
  it('finds a secret through every encoding and layer, and keeps ordinary values', () => {
    const secret = 'canary/Refresh+Token=77&q';
    for (const [name, value] of Object.entries(encodings('S', secret))) expect(holdsSecret(value, [secret]), name).toBe(true);
    // Six layers of base64 are more than the four that are opened and the base64 form under them.
    let deep = secret;
    for (let i = 0; i < 6; i += 1) deep = b64(deep);
    expect(holdsSecret(deep, [secret])).toBe(false);
    for (const ordinary of [
      '/usr/local/bin:/usr/bin:/bin',
      'rs=0:di=01;34:ln=01;36:mi=00:pi=40;33:so=01;35:do=01;35:bd=40;33;01',
      b64('some other configuration entirely, no secret in it'),
      'deadbeefcafebabe0123456789abcdef',
      '/tmp/ssh-XXXXabcdEFGH/agent.1234',
    ]) {
      expect(holdsSecret(ordinary, [secret]), ordinary).toBe(false);
    }
  });

  it('--clean-env keeps PATH, HOME, LANG, TZ and the --pass-env names, and withholds a passed name holding a secret', () => {
    const secret = 'canary-api-key-0123456789';
    const withheld: string[] = [];
    const env = childEnvironment(
      { PATH: '/bin', HOME: '/home/x', LANG: 'C.UTF-8', TZ: 'UTC', SHELL: '/bin/sh', EXTRA: 'yes', LEAKY: b64(`api:${secret}`), LC_ALL: 'C' },
      [secret],
      'DROPBOX_ACCESS_TOKEN',
      TOKEN,
      { clean: true, pass: ['EXTRA', 'LEAKY', 'NOT_SET'], withheld: (name) => withheld.push(name) },
    );
    expect(env).toEqual({
      PATH: '/bin',
      HOME: '/home/x',
      LANG: 'C.UTF-8',
      TZ: 'UTC',
      EXTRA: 'yes',
      DROPBOX_ACCESS_TOKEN: 'sl.child-token',
      DROPBOX_ACCESS_TOKEN_EXPIRES_AT: '2030-01-01T00:00:00Z',
    });
    expect(withheld).toEqual(['LEAKY']);
  });

  it('a real child gets none of the canary secrets in any encoding, with and without --clean-env', async () => {
    const app: EmulatorApp = { ...DEFAULT_APP, appKey: 'canaryAppKey7f3e9a', appSecret: 'canary/App+Secret=9b&x?' };
    const apiKey = 'canary-service-api-key-5d1c2e';
    const emu = await emulator({ apps: [app], workspaces: [{ name: 'default', apiKeys: [apiKey] }] });
    const grant = await obtainGrant(emu, app);
    const home = tempDir();
    const canaries = { API_KEY: apiKey, REFRESH: grant.refreshToken, APP_SECRET: grant.appSecret, APP_KEY: grant.appKey };
    const planted: Record<string, string> = {};
    for (const [label, secret] of Object.entries(canaries)) Object.assign(planted, encodings(label, secret));
    planted.BASIC_APP = `Basic ${b64(`${grant.appKey}:${grant.appSecret}`)}`;
    const env: Record<string, string> = {
      ...containerEnv(emu, grant, home, {}),
      SYNCAUTH_API_KEY: apiKey,
      ...planted,
      KEEP_ME: 'an ordinary value',
      LANG: 'C.UTF-8',
      TZ: 'Europe/Paris',
    };

    const check = (dump: { env: Record<string, string> }, output: string) => {
      const seen = JSON.stringify(dump.env);
      for (const secret of Object.values(canaries)) {
        for (const form of spellings(secret)) {
          expect(seen).not.toContain(form);
          expect(output).not.toContain(form);
        }
      }
      for (const [name, value] of Object.entries(planted)) {
        expect(dump.env[name], name).toBeUndefined();
        expect(seen).not.toContain(value);
      }
    };

    const plain = await runCli(['exec', ...childCommand(home, 'exit:0')], { env, cwd: home });
    expect(plain.code).toBe(0);
    const first = dumpOf(home, startsIn(home)[0]?.pid as number);
    check(first, plain.stdout + plain.stderr);
    expect(first.env.KEEP_ME).toBe('an ordinary value');

    const clean = await runCli(['exec', '--clean-env', '--pass-env', 'KEEP_ME', '--pass-env', 'REFRESH_B64_BLOB', ...childCommand(home, 'exit:0')], { env, cwd: home });
    expect(clean.code).toBe(0);
    const second = dumpOf(home, startsIn(home)[1]?.pid as number);
    check(second, clean.stdout + clean.stderr);
    expect(Object.keys(second.env).sort()).toEqual(['DROPBOX_ACCESS_TOKEN', 'DROPBOX_ACCESS_TOKEN_EXPIRES_AT', 'HOME', 'KEEP_ME', 'LANG', 'PATH', 'TZ']);
    expect(second.env.TZ).toBe('Europe/Paris');
    expect(clean.stderr).toContain('syncauth exec: --pass-env REFRESH_B64_BLOB: not passed, its value holds a secret');
  });

  it('refuses --pass-env without --clean-env, a bad name, or a syncauth secret setting, with exit 2', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const env = containerEnv(emu, grant, home);
    const before = emu.state.requests.length;
    const cases: [string[], RegExp][] = [
      [['exec', '--pass-env', 'FOO', '--', 'true'], /--pass-env: only applies with --clean-env/],
      [['exec', '--clean-env', '--pass-env', '1BAD', '--', 'true'], /--pass-env: "1BAD" must be an environment variable name/],
      [['exec', '--clean-env', '--pass-env', 'SYNCAUTH_APP_SECRET', '--', 'true'], /--pass-env: SYNCAUTH_APP_SECRET is not passed: it is a syncauth setting/],
    ];
    const results = await Promise.all(cases.map(([args]) => runCli(args, { env, cwd: home })));
    for (const [i, [args, message]] of cases.entries()) {
      expect(results[i]?.code, args.join(' ')).toBe(2);
      expect(results[i]?.stderr, args.join(' ')).toMatch(message);
    }
    expect(emu.state.requests.length).toBe(before);
  });
});
