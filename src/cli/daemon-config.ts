// `syncauth daemon --config FILE`: the file's keys become the settings and options the flags and variables
// give, each of which still wins over the file (a clash is logged once at start, naming the winner). A profile's
// own sinks (`profiles.NAME.sinks`) have no flag: they are the most specific, and win over the daemon-wide token
// file however it was given (its templates are rendered besides the daemon-wide ones). On SIGHUP the file is
// read and checked again, whole, own sinks placed as at start: a file with any problem is rejected (logged) and
// the daemon keeps its configuration; a good one changes the profiles served and their own sinks at once. Every
// other key (the daemon-wide sinks and settings) is placed and opened at start, so a change to one is logged as
// needing a restart.
import type { SettingName, Settings } from '../config.js';
import { readDaemonConfig, type DaemonFileConfig } from '../daemon/config-file.js';
import { mergeDaemonInputs, RESTART_KEYS, START_ONLY_KEYS, valueAt, type DaemonCommandOptions } from '../daemon/spec.js';
import { classifyFailure } from '../daemon/classify.js';
import { prepareProfileSinks } from '../daemon/sink-plan.js';
import type { Logger } from '../log.js';
import type { ProfileSinks } from '../publish/token-file.js';
import type { CommandContext } from './context.js';

/** The options of `syncauth daemon` (its flags), which the file's keys join; declared in src/daemon/spec.ts. */
export type { DaemonCommandOptions };

/** The file's label for each setting it gave, by settings object: how the daemon's messages name them. */
const fileLabels = new WeakMap<object, Partial<Record<SettingName, string>>>();

/** The file's label for the notify URLs, by options object, when they came from the file. */
const notifyUrlLabels = new WeakMap<object, string>();

/** `FILE line N: daemon.notify_urls` when the daemon's notify URLs came from the configuration file. */
export function notifyUrlFileLabel(options: DaemonCommandOptions): string | undefined {
  return notifyUrlLabels.get(options);
}

/** `FILE line N: key` when the setting came from the configuration file; undefined otherwise. */
export function configFileLabel(context: CommandContext, name: SettingName): string | undefined {
  return fileLabels.get(context.settings)?.[name];
}

export interface ConfiguredDaemon {
  context: CommandContext;
  options: DaemonCommandOptions;
  /** The file as read at start; undefined without one. */
  config: DaemonFileConfig | undefined;
  /** Logs, once, each key of the file a flag or variable overrides. */
  report(log: Logger): void;
  /**
   * SIGHUP: reads and checks the file again, and prepares the own sinks of the profiles it would serve
   * (`served`, given the profiles asked for: undefined, every stored one). Undefined when there is no file;
   * false when it was rejected (logged, nothing changes); otherwise the profiles to serve now and their own sinks.
   */
  reread(
    log: Logger,
    served: (requested: string[] | undefined) => Promise<readonly string[]>,
    shared: (name: string) => string | undefined,
  ): Promise<{ requested: string[] | undefined; profileSinks: Map<string, ProfileSinks> } | false | undefined>;
}

/** Folds the file named by --config (or SYNCAUTH_DAEMON_CONFIG) into the context and options; no file: as they are. */
export async function withDaemonConfigFile(context: CommandContext, options: DaemonCommandOptions): Promise<ConfiguredDaemon> {
  const file = context.settings.values.config;
  if (file === undefined) return { context, options, config: undefined, report: () => undefined, reread: async () => undefined };
  const config = await readDaemonConfig(file);
  const { values: merged, options: nextOptions, labels, notifyUrlLabel, clashes } = mergeDaemonInputs(context.settings, options, config, (key) => config.where(key));
  const settings = { ...context.settings, values: merged as Settings };
  fileLabels.set(settings, labels);
  if (notifyUrlLabel) notifyUrlLabels.set(nextOptions, notifyUrlLabel);
  const flagProfiles = options.profile && options.profile.length > 0 ? options.profile : undefined;
  const started = config;
  return {
    context: { ...context, settings },
    options: nextOptions,
    config,
    report(log) {
      for (const { key, winner } of clashes) {
        log.info({ event: 'daemon.config_overridden', op: 'start', key, winner }, `${config.where(key)} is overridden by ${winner}: flags and variables win over the configuration file`);
      }
    },
    async reread(log, served, shared) {
      let next: DaemonFileConfig;
      let profileSinks: Map<string, ProfileSinks>;
      try {
        next = await readDaemonConfig(file);
        profileSinks = await prepareProfileSinks(next, await served(flagProfiles ?? next.profiles), log, shared);
      } catch (error) {
        const reason = classifyFailure(error).message;
        log.error({ event: 'daemon.config_rejected', op: 'load', file, reason }, `SIGHUP: ${file} was not applied, the daemon keeps its configuration: ${reason}`);
        return false;
      }
      // A key a flag or variable overrides changes nothing, now or at a restart.
      const overridden = new Set(clashes.map((clash) => clash.key));
      const startOnly = START_ONLY_KEYS.filter((key) => !overridden.has(key) && JSON.stringify(valueAt(started, key)) !== JSON.stringify(valueAt(next, key)));
      if (startOnly.length > 0) {
        const reason = `${startOnly.join(', ')} changed, and ${startOnly.length === 1 ? 'it is' : 'they are'} set up once at start: restart the daemon to change ${startOnly.length === 1 ? 'it' : 'them'}`;
        log.error(
          { event: 'daemon.config_rejected', op: 'load', file, keys: startOnly, reason },
          `SIGHUP: ${file} was not applied, the daemon keeps its configuration: ${reason}`,
        );
        return false;
      }
      const changed = RESTART_KEYS.filter(
        (key) => !overridden.has(key) && JSON.stringify(valueAt(started, key)) !== JSON.stringify(valueAt(next, key)),
      );
      if (changed.length > 0) {
        log.warn({ event: 'daemon.config_restart_needed', op: 'load', file, keys: changed }, `SIGHUP: ${changed.join(', ')} changed in ${file}; these take effect when the daemon is restarted`);
      }
      const requested = flagProfiles ?? next.profiles;
      log.info({ event: 'daemon.config_reloaded', op: 'load', file, ...(requested ? { profiles: requested } : {}) }, `SIGHUP: ${file} applied`);
      return { requested, profileSinks };
    },
  };
}
