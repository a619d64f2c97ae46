// Every option of the daemon, declared once: its flag, its key in the configuration file (`--config`), its
// variable, the one check of its value, whether a reload (SIGHUP) can change it, and its default. The file's
// keys and their checks, the mapping of the file into settings and options, the command's checks of its flags
// and the library's checks of its options are all read from here, so that an option is refused in the same
// words however it was given (only the field differs: the flag, `FILE line N: key`, or the library's name).
//
// A setting shared with other commands (`SETTINGS`, src/config.ts) keeps its flag, variable, parse and default
// there; its entry here says only what the daemon adds (its key in the file, a check of its own, start-only).
// What has no flag (a profile's own sinks) is the file's structure, in config-file.ts.
import * as z from 'zod';
import { SETTINGS, type SettingName, type Settings, type SettingSource } from '../config.js';
import { absorbed, ValidationError, type FieldIssue } from '../errors.js';
import { parseNotifyUrl } from '../notify/targets.js';
import { isProfileName } from '../profile/index.js';
import { parseMode, parseSocketMode } from '../publish/file.js';
import { checkSchedule } from './cron.js';
import { checkRedisUrl, redisTarget } from './redis.js';
import { parseCheckInterval } from './token-check.js';
import type { DaemonOptions, RunningDaemon } from './types.js';

/** One value as its flag takes it (the file's value as text), checked: throws a ValidationError naming `field`. */
export type Check<T = unknown> = (raw: string, field: string) => T;

/** A check of a message-only parse (SETTINGS' and the daemon's own): its Error becomes an issue of `field`. */
function named<T>(parse: (raw: string) => T): Check<T> {
  return (raw, field) => {
    try {
      return parse(raw);
    } catch (error) {
      if (error instanceof ValidationError) throw error;
      throw new ValidationError([{ field, message: (error as Error).message }]);
    }
  };
}

/** A number's rule, for the flag's text, the file's number and the library's option alike. */
export interface NumberRule {
  readonly message: string;
  accepts(value: number): boolean;
  /** The flag's text: digits only for a whole number. */
  readonly text: RegExp;
}

export function wholeNumber(min: number, max: number): NumberRule {
  return { message: `must be a whole number from ${min} to ${max}`, accepts: (n) => Number.isInteger(n) && n >= min && n <= max, text: /^\d+$/ };
}

export function numberAboveZero(example: string, max?: number): NumberRule {
  return {
    message: `must be a number above 0${max === undefined ? '' : ` and at most ${max}`}, like ${example}`,
    accepts: (n) => Number.isFinite(n) && n > 0 && (max === undefined || n <= max),
    text: /\S/,
  };
}

/** A number given to the library (or read from the file) against its rule; throws naming `field`. */
export function checkNumber(rule: NumberRule, value: unknown, field: string): number {
  if (typeof value !== 'number' || !rule.accepts(value)) throw new ValidationError([{ field, message: rule.message }]);
  return value;
}

function numberCheck(rule: NumberRule): Check<number> {
  return (raw, field) => {
    const text = raw.trim();
    if (!rule.text.test(text)) throw new ValidationError([{ field, message: rule.message }]);
    return checkNumber(rule, Number(text), field);
  };
}

/**
 * How the file gives the key. `number`: a YAML number, checked by the rule with the file's shape. `text`: a
 * string (or what `schema` takes), checked once the file's shape is sound. `list`: strings, each checked so.
 * `structure`: the value's shape is the file's own (profiles, sinks), checked as `text` when it has a check.
 */
export type FileForm =
  | { readonly form: 'number'; readonly rule: NumberRule }
  | { readonly form: 'text'; readonly schema?: z.ZodType }
  | { readonly form: 'list'; readonly schema: z.ZodType }
  | { readonly form: 'structure' };

interface Common {
  /** The key in the configuration file, dotted; undefined: the option has no key there. */
  readonly key: string | undefined;
  readonly file: FileForm | undefined;
  /** A reload cannot change it (it is set up once at start): a changed value rejects the reload whole (START_ONLY_KEYS). */
  readonly startOnly: boolean;
  /**
   * The one check of a value (the flag's text, the file's value as text). Undefined: none beyond its shape
   * (and, for a setting, its SETTINGS parse), or one that needs the system (a group name, at start).
   */
  readonly check: Check | undefined;
  /**
   * Whether `checkDaemonOptions` checks the flag's value; false where another part of the command does (the
   * sinks when they are placed, the notify URLs with the notices' settings), or the setting's parse did.
   */
  readonly commandChecks: boolean;
}

/** A setting of SETTINGS the daemon reads: its flag, variable and default are SETTINGS'. */
export interface DaemonSettingSpec extends Common {
  readonly kind: 'setting';
  readonly name: SettingName;
}

/** An option of `syncauth daemon` alone (a flag, and maybe a variable). */
export interface DaemonFlagSpec<Raw = string | string[] | boolean> extends Common {
  readonly kind: 'option';
  readonly flag: string;
  /** The setting whose variable gives it too (SETTINGS' variable), which wins over the file as the flag does. */
  readonly envSetting: SettingName | undefined;
  /** Given as the flag is: one text, repeated texts, or present or not. */
  readonly raw: Raw extends string[] ? 'list' : Raw extends boolean ? 'switch' : 'text';
  /** The value when the flag is not given; undefined: none here (the library's own default, daemon/config.ts). */
  readonly default: unknown;
  /** Of a repeated flag: only the first bad value is named. */
  readonly firstOnly?: boolean;
  /** The file's value as the flag takes it. */
  readonly asFlag?: (value: unknown) => Raw;
}

export type DaemonOptionSpec = DaemonSettingSpec | DaemonFlagSpec;

function setting<K extends string, F extends FileForm>(name: SettingName, key: K, file: F, more: Partial<Pick<Common, 'check' | 'startOnly' | 'commandChecks'>> = {}): DaemonSettingSpec & { key: K; file: F } {
  const parse = SETTINGS[name].parse as (raw: string) => unknown;
  return { kind: 'setting', name, key, file, startOnly: more.startOnly ?? false, check: more.check ?? (file ? named(parse) : undefined), commandChecks: more.commandChecks ?? false };
}

function text<K extends string, F extends FileForm>(
  flag: string,
  key: K,
  file: F,
  check: Check | undefined,
  more: { default?: unknown; startOnly?: boolean; commandChecks?: boolean } = {},
): DaemonFlagSpec<string> & { key: K; file: F } {
  return { kind: 'option', raw: 'text', flag, envSetting: undefined, key, file, check, default: more.default, startOnly: more.startOnly ?? false, commandChecks: more.commandChecks ?? true, asFlag: String };
}

const absent = undefined;
const NAME_RULE = 'must be 1-64 letters, digits, dot, dash or underscore, starting with a letter or digit';

/** A template of the file as its flag takes it, `SRC:DEST[:MODE]`. */
const template = (t: { source: string; dest: string; mode?: string }): string => `${t.source}:${t.dest}${t.mode !== undefined ? `:${t.mode}` : ''}`;

/** Renewals and reconciles running at once, when neither the flag, the file nor the library's option says. */
export const DEFAULT_CONCURRENCY = 4;
/** How long a stop waits for in-flight work, in seconds, when nothing says. */
export const DEFAULT_SHUTDOWN_TIMEOUT_SECONDS = 10;

const RENEW_MARGIN = wholeNumber(1, 14_399);
const CONCURRENCY = wholeNumber(1, 1000);
/** The cap of renewals a second: the library's option takes the same rule as the flag and the file. */
export const RENEWALS_PER_SECOND = numberAboveZero('5 or 0.5');
const CHECKS_PER_SECOND = numberAboveZero('1 or 0.5', 100);
const SHUTDOWN_TIMEOUT = wholeNumber(1, 600);
const FAILING_AFTER = wholeNumber(1, 7 * 24 * 3600);

/**
 * Every daemon option, in the order of the file's keys (the order "did you mean" weighs ties in, and the order
 * problems are named in). The key of an option is its name in `DaemonCommandOptions` or in SETTINGS.
 */
export const DAEMON_SPEC = {
  profile: {
    kind: 'option', raw: 'list', flag: '--profile', envSetting: absent, key: 'profiles', file: { form: 'structure' }, startOnly: false, default: absent, firstOnly: true, commandChecks: true,
    check: (raw: string, field: string) => {
      if (!isProfileName(raw)) throw new ValidationError([{ field, message: NAME_RULE }]);
      return raw;
    },
    asFlag: (value: unknown) => value as string[],
  } satisfies DaemonFlagSpec<string[]>,
  tokenFile: setting('tokenFile', 'sinks.token_file.path', { form: 'structure' }, { check: absent }),
  tokenFileMode: setting('tokenFileMode', 'sinks.token_file.mode', { form: 'structure' }, { check: parseMode }),
  // Its group is looked up when the file is read, and again on SIGHUP (config-file.ts, checkGroups).
  tokenFileGroup: setting('tokenFileGroup', 'sinks.token_file.group', { form: 'structure' }, { check: absent }),
  template: {
    kind: 'option', raw: 'list', flag: '--template', envSetting: absent, key: 'sinks.templates', file: { form: 'structure' }, startOnly: false, default: absent, check: absent, commandChecks: false,
    asFlag: (value: unknown) => (value as { source: string; dest: string; mode?: string }[]).map(template),
  } satisfies DaemonFlagSpec<string[]>,
  socket: setting('socket', 'sinks.socket.path', { form: 'structure' }, { check: absent }),
  socketMode: text('--socket-mode', 'sinks.socket.mode', { form: 'structure' }, parseSocketMode, { commandChecks: false }),
  socketGroup: text('--socket-group', 'sinks.socket.group', { form: 'structure' }, absent, { commandChecks: false }),
  listen: setting('listen', 'daemon.listen', { form: 'text' }),
  renewMargin: setting('renewMargin', 'daemon.renew_margin', { form: 'number', rule: RENEW_MARGIN }),
  sweep: setting('sweep', 'daemon.sweep', { form: 'text' }, { check: checkSchedule, commandChecks: true }),
  redisUrl: setting('redisUrl', 'daemon.redis_url', { form: 'text' }, { check: checkRedisUrl, commandChecks: true }),
  concurrency: text('--concurrency', 'daemon.concurrency', { form: 'number', rule: CONCURRENCY }, numberCheck(CONCURRENCY), { default: DEFAULT_CONCURRENCY }),
  maxRenewalsPerSecond: text('--max-renewals-per-second', 'daemon.max_renewals_per_second', { form: 'number', rule: RENEWALS_PER_SECOND }, numberCheck(RENEWALS_PER_SECOND)),
  // How often each published token is checked with Dropbox ("15m", seconds, or 0/"off"), and at most how many a second.
  checkInterval: text(
    '--check-interval',
    'daemon.check_interval',
    { form: 'text', schema: z.union([z.string(), z.number().int().min(0)], { error: 'must be a duration like "15m" or "90s", a whole number of seconds, or 0 or "off"' }) },
    named(parseCheckInterval),
  ),
  maxChecksPerSecond: text('--max-checks-per-second', 'daemon.max_checks_per_second', { form: 'number', rule: CHECKS_PER_SECOND }, numberCheck(CHECKS_PER_SECOND)),
  shutdownTimeout: text('--shutdown-timeout', 'daemon.shutdown_timeout', { form: 'number', rule: SHUTDOWN_TIMEOUT }, numberCheck(SHUTDOWN_TIMEOUT), { default: DEFAULT_SHUTDOWN_TIMEOUT_SECONDS }),
  logLevel: setting('logLevel', 'daemon.log_level', { form: 'text' }),
  // Who is told when a person is needed, and the re-authorization page, are set up once at start. Their secrets
  // are never keys of the file. SYNCAUTH_NOTIFY_URL wins over the file as the flag does.
  notifyUrl: {
    kind: 'option', raw: 'list', flag: '--notify-url', envSetting: 'notifyUrl', key: 'daemon.notify_urls', startOnly: true, default: absent, commandChecks: false,
    file: { form: 'list', schema: z.array(z.string()).min(1, 'names no URL; leave the key out to send no notices') },
    check: (raw: string, field: string) => parseNotifyUrl(raw, field),
    asFlag: (value: unknown) => value as string[],
  } satisfies DaemonFlagSpec<string[]>,
  notifyFormat: setting('notifyFormat', 'daemon.notify_format', { form: 'text' }, { startOnly: true }),
  notifyConnectorFailingAfter: setting('notifyConnectorFailingAfter', 'daemon.notify_connector_failing_after', { form: 'number', rule: FAILING_AFTER }, { startOnly: true }),
  reauthListen: setting('reauthListen', 'daemon.reauth_listen', { form: 'text' }, { startOnly: true }),
  publicUrl: setting('publicUrl', 'daemon.public_url', { form: 'text' }, { startOnly: true }),
  reauthLinkTtl: setting('reauthLinkTtl', 'daemon.reauth_link_ttl', { form: 'text', schema: z.union([z.string(), z.number().int()]) }, { startOnly: true }),
  /**
   * Fleet mode: the profiles this replica publishes nowhere are shared among the replicas of one Redis, each
   * renewed by one of them (fleet.ts). Needs --redis-url and SYNCAUTH_GRANT_KEY.
   */
  fleet: {
    kind: 'option', raw: 'switch', flag: '--fleet', envSetting: absent, key: 'daemon.fleet', startOnly: true, default: false, check: absent, commandChecks: true,
    file: { form: 'text', schema: z.boolean({ error: 'must be true or false' }) },
    asFlag: (value: unknown) => value === true,
  } satisfies DaemonFlagSpec<boolean>,
  /** One pass: renew what is due, reconcile, publish, exit (init containers, Jobs, cron). */
  once: { kind: 'option', raw: 'switch', flag: '--once', envSetting: absent, key: absent, file: absent, startOnly: false, default: false, check: absent, commandChecks: false } satisfies DaemonFlagSpec<boolean>,
} as const satisfies Record<string, DaemonOptionSpec>;

export type DaemonSpecName = keyof typeof DAEMON_SPEC;
type FlagNames = { [K in DaemonSpecName]: (typeof DAEMON_SPEC)[K] extends { kind: 'option' } ? K : never }[DaemonSpecName];
type RawOf<S> = S extends { raw: 'list' } ? string[] : S extends { raw: 'switch' } ? boolean : string;

/** The options of `syncauth daemon` (its flags beside the settings'), which the file's keys join. */
export type DaemonCommandOptions = { [K in FlagNames]?: RawOf<(typeof DAEMON_SPEC)[K]> };

type SectionKey<K> = K extends `daemon.${infer N}` ? N : never;
type FileValue<F> = F extends { form: 'number' } ? number : F extends { form: 'list' } ? string[] : string | number;
/** The file's `daemon` section as checked: keys as written (snake case), values as the file gave them. */
export type DaemonSection = { [K in DaemonSpecName as SectionKey<(typeof DAEMON_SPEC)[K]['key']>]?: FileValue<(typeof DAEMON_SPEC)[K]['file']> };

export const DAEMON_OPTIONS: readonly (readonly [DaemonSpecName, DaemonOptionSpec])[] = Object.freeze(Object.entries(DAEMON_SPEC) as [DaemonSpecName, DaemonOptionSpec][]);

/** The entries the file has a key for, with it. */
export const FILE_OPTIONS = DAEMON_OPTIONS.filter((entry): entry is readonly [DaemonSpecName, DaemonOptionSpec & { key: string; file: FileForm }] => entry[1].key !== undefined && entry[1].file !== undefined);

/** The zod shape of the file's `daemon` section, from the options whose keys are under it. */
export function daemonSectionShape(): Record<string, z.ZodType> {
  const shape: Record<string, z.ZodType> = {};
  for (const [, spec] of FILE_OPTIONS) {
    if (!spec.key.startsWith('daemon.')) continue;
    const file = spec.file;
    const name = spec.key.slice('daemon.'.length);
    if (file.form === 'number') {
      const { message, accepts } = file.rule;
      shape[name] = z.number({ error: message }).refine(accepts, { error: message }).optional();
    } else if (file.form === 'text') {
      shape[name] = (file.schema ?? z.string()).optional();
    } else if (file.form === 'list') {
      shape[name] = file.schema.optional();
    }
  }
  return shape;
}

/** The value at a dotted key of what the file gave (`sinks.token_file.mode`). */
export function valueAt(config: object, key: string): unknown {
  let at: unknown = config;
  for (const part of key.split('.')) at = at && typeof at === 'object' ? (at as Record<string, unknown>)[part] : undefined;
  return at;
}

/**
 * The checks of the file's values once its shape is sound (a number's rule ran with the shape): each a
 * problem named by `where(key)`, a list's item by its index; the daemon's settings first, then the sinks'.
 */
export function fileValueIssues(values: object, where: (key: readonly (string | number)[]) => string): FieldIssue[] {
  const issues: FieldIssue[] = [];
  const run = (check: Check, raw: string, keys: (string | number)[]): void => void absorbed(issues, () => check(raw, where(keys)));
  const daemonFirst = [...FILE_OPTIONS].sort(([, a], [, b]) => Number(!a.key.startsWith('daemon.')) - Number(!b.key.startsWith('daemon.')));
  for (const [, spec] of daemonFirst) {
    const value = valueAt(values, spec.key);
    if (value === undefined || spec.check === undefined || spec.file.form === 'number') continue;
    const keys = spec.key.split('.');
    if (Array.isArray(value)) {
      if (spec.file.form === 'list') value.forEach((item, i) => run(spec.check as Check, String(item), [...keys, i]));
    } else {
      run(spec.check, String(value), keys);
    }
  }
  return issues;
}

/** A flag's value checked by its entry: the parsed value, its default when absent, undefined when refused. */
function checkFlag(spec: DaemonFlagSpec, raw: unknown, field: string, issues: FieldIssue[]): unknown {
  if (raw === undefined || spec.check === undefined) return raw ?? spec.default;
  const values = Array.isArray(raw) ? (raw as string[]) : [raw as string];
  const parsed: unknown[] = [];
  for (const value of values) {
    try {
      parsed.push(spec.check(value, field));
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      issues.push(...error.issues);
      if (spec.firstOnly) break;
      parsed.push(undefined);
    }
  }
  if (Array.isArray(raw)) return parsed;
  return parsed[0] === undefined ? spec.default : parsed[0];
}

export type CheckedOptions = { [K in FlagNames]?: unknown } & { [K in SettingName]?: unknown };

/**
 * The command's own checks of the daemon's options and settings (those not checked by their SETTINGS parse or
 * by another part of the command), in the spec's order, of those `which` picks: each value parsed (its default
 * when not given), every problem pushed onto `issues`. `label` names a setting as the person gave it; an option
 * is named by its flag.
 */
export function checkDaemonOptions(
  values: Partial<Record<SettingName, unknown>>,
  options: DaemonCommandOptions,
  label: (name: SettingName) => string,
  issues: FieldIssue[],
  which: (name: DaemonSpecName) => boolean = () => true,
): CheckedOptions {
  const checked: Record<string, unknown> = {};
  for (const [name, spec] of DAEMON_OPTIONS) {
    if (!spec.commandChecks || !which(name)) continue;
    if (spec.kind === 'setting') {
      const value = values[spec.name];
      if (value === undefined || spec.check === undefined) continue;
      const check = spec.check;
      absorbed(issues, () => check(String(value), label(spec.name)));
      checked[name] = value;
    } else {
      checked[name] = checkFlag(spec, options[name as FlagNames], spec.flag, issues);
    }
  }
  return checked as CheckedOptions;
}

/** What the configuration file changed of the settings and options, and what the flags and variables kept. */
export interface MergedInputs {
  values: Record<string, unknown>;
  options: DaemonCommandOptions;
  /** The file's label (`FILE line N: key`) of each setting it gave. */
  labels: Partial<Record<SettingName, string>>;
  /** The file's label of the notify URLs, when they came from it. */
  notifyUrlLabel: string | undefined;
  /** Each key a flag or variable overrides, and which. */
  clashes: { key: string; winner: string }[];
}

/**
 * Flags, environment and file in one place: a flag or variable wins over the file's key (a clash, logged once
 * at start); otherwise the key's value is taken, parsed as its flag's or variable's value is (the file's checks
 * have already passed).
 */
export function mergeDaemonInputs(
  settings: { values: Settings; sources: Partial<Record<SettingName, SettingSource>> },
  options: DaemonCommandOptions,
  config: object,
  where: (key: string) => string,
): MergedInputs {
  const { values, sources } = settings;
  const merged: Record<string, unknown> = { ...values };
  const nextOptions: Record<string, unknown> = { ...options };
  const labels: Partial<Record<SettingName, string>> = {};
  const clashes: { key: string; winner: string }[] = [];
  let notifyUrlLabel: string | undefined;
  for (const [name, spec] of FILE_OPTIONS) {
    const value = valueAt(config, spec.key);
    if (value === undefined) continue;
    if (spec.kind === 'setting') {
      const source = sources[spec.name];
      if (source === 'flag' || source === 'env') {
        const setting = SETTINGS[spec.name] as { flag?: string; env: string };
        clashes.push({ key: spec.key, winner: source === 'flag' && setting.flag ? `--${setting.flag}` : setting.env });
        continue;
      }
      merged[spec.name] = (SETTINGS[spec.name].parse as (raw: string) => unknown)(String(value));
      labels[spec.name] = where(spec.key);
      continue;
    }
    const given = options[name as FlagNames];
    if (given !== undefined && !(Array.isArray(given) && given.length === 0)) {
      clashes.push({ key: spec.key, winner: spec.flag });
      continue;
    }
    // An option with a variable as well as a flag (the notify URLs): the variable wins over the file too.
    if (spec.envSetting !== undefined && sources[spec.envSetting] === 'env') {
      clashes.push({ key: spec.key, winner: SETTINGS[spec.envSetting].env });
      continue;
    }
    if (name === 'notifyUrl') notifyUrlLabel = where(spec.key);
    nextOptions[name] = spec.asFlag ? spec.asFlag(value) : String(value);
  }
  return { values: merged, options: nextOptions as DaemonCommandOptions, labels, notifyUrlLabel, clashes };
}

/**
 * The file's keys that are no option's, by declaration: the file's version, and a profile's own sinks (the most
 * specific sinks, which have no flag). Every other key of the file is an option's, or a part of one's value
 * (a template's `source`, `dest` and `mode` are `--template SRC:DEST:MODE`).
 */
export const FILE_ONLY_KEYS: readonly string[] = Object.freeze(['version', 'profiles.<name>']);

/**
 * Keys the running daemon cannot take on SIGHUP (who is told, and the page's listener, origin and link life are
 * set up once at start): a reload that changes one is rejected whole, with the reason logged, and nothing of the
 * file is applied, so that the daemon never runs half on the old file and half on the new. Every other key but
 * the profiles is placed and opened at start: a change to one is logged as needing a restart.
 */
export const START_ONLY_KEYS: readonly string[] = Object.freeze(FILE_OPTIONS.filter(([, spec]) => spec.startOnly).map(([, spec]) => spec.key));
export const RESTART_KEYS: readonly string[] = Object.freeze(FILE_OPTIONS.filter(([name, spec]) => !spec.startOnly && name !== 'profile').map(([, spec]) => spec.key));

/** The settings the daemon's options and start line are drawn from, besides the options checked by their entries. */
export type DaemonSettingValues = Pick<Settings, 'renewMargin' | 'sweep' | 'listen' | 'notifyConnectorFailingAfter' | 'redisUrl'>;

/** The sinks of the run as planned and placed (src/daemon/sink-plan.ts). */
export type PlannedSinks = Pick<DaemonOptions, 'tokenFile' | 'tokenFileAccess' | 'socket'> & Required<Pick<DaemonOptions, 'templates' | 'profileSinks'>>;

/** What the daemon's start line and its options are drawn from: the settings, the options checked, the sinks. */
export interface DaemonInputs {
  values: DaemonSettingValues;
  /** The options as `checkDaemonOptions` parsed them (each its default when not given). */
  checked: CheckedOptions;
  sinks: PlannedSinks;
  /** One pass (--once): no schedule, no listener, no socket. */
  once: boolean;
}

/**
 * The library's options (src/daemon/types.ts) of the daemon's settings and options and of its sinks: an option
 * the library takes is mapped here, beside its entry. The parts (the profiles and their loader, the locks, the
 * coordinator, the notices, the hooks, the logger) are the caller's.
 */
export function daemonOptionsOf({ values, checked, sinks, once }: DaemonInputs) {
  return {
    renewMarginMs: values.renewMargin * 1000,
    // One pass runs no schedule: its sweep is the whole of it.
    schedule: once ? false : values.sweep,
    sweepOnStart: !once,
    concurrency: checked.concurrency as number,
    ...(checked.maxRenewalsPerSecond !== undefined ? { maxRenewalsPerSecond: checked.maxRenewalsPerSecond as number } : {}),
    ...(checked.checkInterval !== undefined ? { checkIntervalMs: checked.checkInterval as number } : {}),
    ...(checked.maxChecksPerSecond !== undefined ? { maxChecksPerSecond: checked.maxChecksPerSecond as number } : {}),
    ...(sinks.tokenFile ? { tokenFile: sinks.tokenFile } : {}),
    ...(sinks.tokenFileAccess ? { tokenFileAccess: sinks.tokenFileAccess } : {}),
    ...(sinks.templates.length > 0 ? { templates: sinks.templates } : {}),
    ...(sinks.profileSinks.size > 0 ? { profileSinks: sinks.profileSinks } : {}),
    ...(sinks.socket && !once ? { socket: sinks.socket } : {}),
    ...(values.listen && !once ? { listen: values.listen } : {}),
    ...(checked.fleet === true ? { fleet: true } : {}),
    connectorFailingAfterMs: values.notifyConnectorFailingAfter * 1000,
    shutdownTimeoutMs: (checked.shutdownTimeout as number) * 1000,
  } satisfies Partial<DaemonOptions>;
}

/**
 * The fields of the daemon.started line drawn from the settings, the sinks and the running daemon, in the line's
 * order: the token checks as it says them (how often, and so how long a revoked grant may go unnoticed).
 */
export function daemonStartedFields({ values, checked, sinks }: DaemonInputs, running: Pick<RunningDaemon, 'status' | 'url'>): Record<string, unknown> {
  const checks = running.status().checks;
  return {
    sweep: values.sweep,
    renewMarginSeconds: values.renewMargin,
    concurrency: checked.concurrency,
    ...(checked.maxRenewalsPerSecond !== undefined ? { maxRenewalsPerSecond: checked.maxRenewalsPerSecond } : {}),
    ...(checks ? { checkIntervalSeconds: checks.intervalSeconds, maxChecksPerSecond: checks.maxPerSecond, revocationNoticedWithinSeconds: checks.noticeWithinSeconds } : { checks: 'off' }),
    ...(sinks.tokenFile ? { tokenFile: sinks.tokenFile } : {}),
    ...(sinks.templates.length > 0 ? { templates: sinks.templates.map((t) => t.dest) } : {}),
    ...(sinks.profileSinks.size > 0
      ? { profileSinks: Object.fromEntries([...sinks.profileSinks].map(([name, own]) => [name, { tokenFile: own.tokenFile, templates: own.templates?.map((t) => t.dest) }])) }
      : {}),
    ...(sinks.socket ? { socket: sinks.socket.path } : {}),
    ...(running.url ? { listen: running.url } : {}),
    ...(values.redisUrl ? { redis: redisTarget(values.redisUrl) } : {}),
    ...(checked.fleet === true ? { fleet: true } : {}),
  };
}
