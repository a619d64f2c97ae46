// `syncauth daemon --config FILE`: the file's keys become the settings and options the flags and variables
// give, each of which still wins over the file (a clash is logged once at start, naming the winner). On SIGHUP
// the file is read and checked again, whole: a file with any problem is rejected (logged) and the daemon keeps
// its configuration; a good one changes the profiles served at once. Every other key (sinks and daemon-wide
// settings) is placed and opened at start, so a change to one is logged as needing a restart.
import { SETTINGS, type SettingName, type Settings } from '../config.js';
import { readDaemonConfig, type DaemonFileConfig } from '../daemon/config-file.js';
import { classifyFailure } from '../daemon/classify.js';
import type { Logger } from '../log.js';
import type { DaemonCommandOptions } from './commands/daemon.js';
import type { CommandContext } from './context.js';

/** A setting the file may give, and its key there. */
const SETTING_KEYS: readonly [SettingName, string][] = [
  ['tokenFile', 'sinks.token_file.path'],
  ['tokenFileMode', 'sinks.token_file.mode'],
  ['tokenFileGroup', 'sinks.token_file.group'],
  ['socket', 'sinks.socket.path'],
  ['listen', 'daemon.listen'],
  ['renewMargin', 'daemon.renew_margin'],
  ['sweep', 'daemon.sweep'],
  ['redisUrl', 'daemon.redis_url'],
  ['logLevel', 'daemon.log_level'],
];

/** A daemon option (flags only) the file may give, its flag and its key there. */
const OPTION_KEYS: readonly [keyof DaemonCommandOptions, string, string][] = [
  ['profile', '--profile', 'profiles'],
  ['concurrency', '--concurrency', 'daemon.concurrency'],
  ['maxRenewalsPerSecond', '--max-renewals-per-second', 'daemon.max_renewals_per_second'],
  ['shutdownTimeout', '--shutdown-timeout', 'daemon.shutdown_timeout'],
  ['template', '--template', 'sinks.templates'],
  ['socketMode', '--socket-mode', 'sinks.socket.mode'],
  ['socketGroup', '--socket-group', 'sinks.socket.group'],
];

function valueAt(config: DaemonFileConfig, key: string): unknown {
  let at: unknown = config;
  for (const part of key.split('.')) at = at && typeof at === 'object' ? (at as Record<string, unknown>)[part] : undefined;
  return at;
}

/** The key's value as the flag would take it. */
function asFlag(key: string, value: unknown): string | string[] {
  if (key === 'profiles') return value as string[];
  if (key === 'sinks.templates') return (value as { source: string; dest: string; mode?: string }[]).map((t) => `${t.source}:${t.dest}${t.mode !== undefined ? `:${t.mode}` : ''}`);
  return String(value);
}

/** The file's label for each setting it gave, by settings object: how the daemon's messages name them. */
const fileLabels = new WeakMap<object, Partial<Record<SettingName, string>>>();

/** `FILE line N: key` when the setting came from the configuration file; undefined otherwise. */
export function configFileLabel(context: CommandContext, name: SettingName): string | undefined {
  return fileLabels.get(context.settings)?.[name];
}

export interface ConfiguredDaemon {
  context: CommandContext;
  options: DaemonCommandOptions;
  /** Logs, once, each key of the file a flag or variable overrides. */
  report(log: Logger): void;
  /**
   * SIGHUP: reads and checks the file again. Undefined when there is no file; false when it was rejected (logged,
   * nothing changes); otherwise the profiles to serve now (undefined: every stored one).
   */
  reread(log: Logger): Promise<{ requested: string[] | undefined } | false | undefined>;
}

/** Folds the file named by --config (or SYNCAUTH_DAEMON_CONFIG) into the context and options; no file: as they are. */
export async function withDaemonConfigFile(context: CommandContext, options: DaemonCommandOptions): Promise<ConfiguredDaemon> {
  const file = context.settings.values.config;
  if (file === undefined) return { context, options, report: () => undefined, reread: async () => undefined };
  const config = await readDaemonConfig(file);
  const { values, sources } = context.settings;
  const merged: Record<string, unknown> = { ...values };
  const labels: Partial<Record<SettingName, string>> = {};
  const clashes: { key: string; winner: string }[] = [];
  for (const [name, key] of SETTING_KEYS) {
    const value = valueAt(config, key);
    if (value === undefined) continue;
    const source = sources[name];
    if (source === 'flag' || source === 'env') {
      const spec = SETTINGS[name] as { flag?: string; env: string };
      clashes.push({ key, winner: source === 'flag' && spec.flag ? `--${spec.flag}` : spec.env });
      continue;
    }
    const raw = String(value);
    // Parsed as the flag's value is (the file's checks have already passed).
    merged[name] = (SETTINGS[name].parse as (raw: string) => unknown)(raw);
    labels[name] = config.where(key);
  }
  const nextOptions: Record<string, unknown> = { ...options };
  for (const [option, flag, key] of OPTION_KEYS) {
    const value = valueAt(config, key);
    if (value === undefined) continue;
    const given = options[option];
    if (given !== undefined && !(Array.isArray(given) && given.length === 0)) {
      clashes.push({ key, winner: flag });
      continue;
    }
    nextOptions[option] = asFlag(key, value);
  }
  const settings = { ...context.settings, values: merged as Settings };
  fileLabels.set(settings, labels);
  const flagProfiles = options.profile && options.profile.length > 0 ? options.profile : undefined;
  const started = config;
  return {
    context: { ...context, settings },
    options: nextOptions as DaemonCommandOptions,
    report(log) {
      for (const { key, winner } of clashes) {
        log.info({ event: 'daemon.config_overridden', op: 'start', key, winner }, `${config.where(key)} is overridden by ${winner}: flags and variables win over the configuration file`);
      }
    },
    async reread(log) {
      let next: DaemonFileConfig;
      try {
        next = await readDaemonConfig(file);
      } catch (error) {
        const reason = classifyFailure(error).message;
        log.error({ event: 'daemon.config_rejected', op: 'load', file, reason }, `SIGHUP: ${file} was not applied, the daemon keeps its configuration: ${reason}`);
        return false;
      }
      // A key a flag or variable overrides changes nothing, now or at a restart.
      const overridden = new Set(clashes.map((clash) => clash.key));
      const changed = [...SETTING_KEYS.map(([, key]) => key), ...OPTION_KEYS.map(([, , key]) => key).filter((key) => key !== 'profiles')].filter(
        (key) => !overridden.has(key) && JSON.stringify(valueAt(started, key)) !== JSON.stringify(valueAt(next, key)),
      );
      if (changed.length > 0) {
        log.warn({ event: 'daemon.config_restart_needed', op: 'load', file, keys: changed }, `SIGHUP: ${changed.join(', ')} changed in ${file}; these take effect when the daemon is restarted`);
      }
      const requested = flagProfiles ?? next.profiles;
      log.info({ event: 'daemon.config_reloaded', op: 'load', file, ...(requested ? { profiles: requested } : {}) }, `SIGHUP: ${file} applied`);
      return { requested };
    },
  };
}
