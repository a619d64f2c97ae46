// The daemon's options, declared once (src/daemon/spec.ts): every key of the configuration file is an option's
// or declared the file's own, every check names the field it is given, and an option is refused in the same
// words from its flag, from the file and from the library.
import { describe, expect, it } from 'vitest';
import { SETTINGS } from '../../src/config.js';
import { CONFIG_KEYS, parseDaemonConfig } from '../../src/daemon/config-file.js';
import { resolveDaemonConfig } from '../../src/daemon/config.js';
import {
  checkDaemonOptions,
  DAEMON_OPTIONS,
  DAEMON_SPEC,
  FILE_ONLY_KEYS,
  mergeDaemonInputs,
  RESTART_KEYS,
  START_ONLY_KEYS,
  type DaemonCommandOptions,
} from '../../src/daemon/spec.js';
import type { DaemonOptions } from '../../src/daemon/types.js';
import { ValidationError, type FieldIssue } from '../../src/errors.js';
import type { Settings } from '../../src/config.js';

function refusal(run: () => unknown): FieldIssue[] {
  try {
    run();
  } catch (error) {
    if (error instanceof ValidationError) return error.issues;
    throw error;
  }
  throw new Error('was not refused');
}

const keyed = DAEMON_OPTIONS.filter(([, spec]) => spec.key !== undefined);
const flagOf = (name: string): string | undefined => {
  const spec = DAEMON_SPEC[name as keyof typeof DAEMON_SPEC];
  if (spec.kind === 'option') return spec.flag;
  const setting = SETTINGS[spec.name] as { flag?: string };
  return setting.flag === undefined ? undefined : `--${setting.flag}`;
};

describe('the daemon spec', () => {
  it('gives every key of the file an option with a flag, or declares it the file\'s own', () => {
    const optionKeys = keyed.map(([, spec]) => spec.key as string);
    for (const key of CONFIG_KEYS) {
      const container = CONFIG_KEYS.some((other) => other.startsWith(`${key}.`)) && !optionKeys.includes(key);
      const owned = optionKeys.some((optionKey) => key === optionKey || key.startsWith(`${optionKey}.`));
      const fileOnly = FILE_ONLY_KEYS.some((own) => key === own || key.startsWith(`${own}.`));
      expect(container || owned || fileOnly, `${key} is no option's and not declared the file's own`).toBe(true);
    }
    for (const [name, spec] of keyed) {
      expect(CONFIG_KEYS, name).toContain(spec.key);
      expect(flagOf(name), `${name} has a key but no flag`).toMatch(/^--[a-z-]+$/);
    }
    // Every key of the file's daemon section is an option's.
    expect(CONFIG_KEYS.filter((key) => key.startsWith('daemon.'))).toEqual(optionKeys.filter((key) => key.startsWith('daemon.')));
  });

  it('has every check name the field it is given', () => {
    const checked = DAEMON_OPTIONS.filter(([, spec]) => spec.check !== undefined);
    expect(checked.length).toBeGreaterThan(10);
    for (const [name, spec] of checked) {
      const issues = refusal(() => spec.check?.('', `the field of ${name}`));
      expect(issues.length, name).toBeGreaterThan(0);
      for (const issue of issues) expect(issue.field, name).toBe(`the field of ${name}`);
    }
  });

  it('refuses maxRenewalsPerSecond in the same words from the flag, the file and the library', () => {
    const message = 'must be a number above 0, like 5 or 0.5';
    const flag: FieldIssue[] = [];
    checkDaemonOptions({}, { maxRenewalsPerSecond: '0' }, () => 'unused', flag);
    const file = refusal(() => parseDaemonConfig('version: 1\ndaemon:\n  max_renewals_per_second: 0\n', '/etc/syncauth/syncauth.yaml'));
    const library = refusal(() => resolveDaemonConfig({ renewMarginMs: 900_000, maxRenewalsPerSecond: 0 } as DaemonOptions));
    expect(flag).toEqual([{ field: '--max-renewals-per-second', message }]);
    expect(file).toEqual([{ field: '/etc/syncauth/syncauth.yaml line 3: daemon.max_renewals_per_second', message }]);
    expect(library).toEqual([{ field: 'maxRenewalsPerSecond', message }]);
    expect(resolveDaemonConfig({ renewMarginMs: 900_000, maxRenewalsPerSecond: 0.5 } as DaemonOptions).maxRenewalsPerSecond).toBe(0.5);
  });

  it("states a setting's number rule for the file in the words its SETTINGS parse uses", () => {
    for (const name of ['renewMargin', 'notifyConnectorFailingAfter'] as const) {
      const file = DAEMON_SPEC[name].file;
      expect(() => SETTINGS[name].parse('0')).toThrow(file.rule.message);
      expect(refusal(() => DAEMON_SPEC[name].check?.('0', 'f'))).toEqual([{ field: 'f', message: file.rule.message }]);
    }
  });

  it('checks the flags it owns, applying defaults, and leaves the rest to the parts that own them', () => {
    const issues: FieldIssue[] = [];
    const options: DaemonCommandOptions = { concurrency: ' 8 ', checkInterval: '90s', profile: ['docs', 'a b', 'c d'], socketMode: '0777' };
    const checked = checkDaemonOptions({ sweep: '* * * * *' }, options, () => '--sweep', issues);
    expect(checked).toMatchObject({ concurrency: 8, shutdownTimeout: 10, checkInterval: 90_000, maxRenewalsPerSecond: undefined });
    // One bad --profile is named once; --socket-mode is checked where the socket is placed.
    expect(issues).toEqual([{ field: '--profile', message: expect.stringMatching(/^must be 1-64 letters/) }]);
  });

  it('merges flags, variables and the file: flags and variables win, the file fills the rest, named by its line', () => {
    const config = parseDaemonConfig('version: 1\ndaemon:\n  concurrency: 7\n  shutdown_timeout: 20\n  log_level: debug\n  listen: 127.0.0.1:9464\n  notify_urls: [https://hooks.example.com/a]\n', '/s.yaml');
    const values = { logLevel: 'info', listen: undefined } as unknown as Settings;
    const merged = mergeDaemonInputs({ values, sources: { logLevel: 'flag', notifyUrl: 'env' } }, { concurrency: '3' }, config, (key) => config.where(key));
    expect(merged.options).toMatchObject({ concurrency: '3', shutdownTimeout: '20' });
    expect(merged.options.notifyUrl).toBeUndefined();
    expect(merged.values.logLevel).toBe('info');
    expect(merged.values.listen).toEqual(SETTINGS.listen.parse('127.0.0.1:9464'));
    expect(merged.labels).toEqual({ listen: '/s.yaml line 6: daemon.listen' });
    expect(merged.clashes).toEqual([
      { key: 'daemon.concurrency', winner: '--concurrency' },
      { key: 'daemon.log_level', winner: '--log-level' },
      { key: 'daemon.notify_urls', winner: 'SYNCAUTH_NOTIFY_URL' },
    ]);
  });

  it('says which keys a reload cannot change, and which change only at a restart', () => {
    expect(START_ONLY_KEYS).toEqual(['daemon.notify_urls', 'daemon.notify_format', 'daemon.notify_connector_failing_after', 'daemon.reauth_listen', 'daemon.public_url', 'daemon.reauth_link_ttl', 'daemon.fleet']);
    expect(RESTART_KEYS).not.toContain('profiles');
    expect(RESTART_KEYS).toEqual(expect.arrayContaining(['sinks.token_file.path', 'sinks.templates', 'daemon.concurrency', 'daemon.sweep']));
    expect(RESTART_KEYS.filter((key) => START_ONLY_KEYS.includes(key))).toEqual([]);
  });
});
