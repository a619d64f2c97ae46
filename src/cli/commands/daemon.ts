// `syncauth daemon`: the sidecar. Resolves the profiles (every stored one, those named with --profile, or one
// made entirely of environment variables in a container), checks every setting before anything starts, and
// turns signals into a graceful stop (SIGTERM, SIGINT) or a reload (SIGHUP).
import { syncauthCommand } from '../../profile/name.js';
import path from 'node:path';
import { SETTINGS, type SettingName } from '../../config.js';
import {
  createRedisCoordinator,
  isLoadFailure,
  redisTarget,
  startDaemon,
  type DaemonProfile,
  type ProfileEntry,
  type RunningDaemon,
} from '../../daemon/index.js';
import { ExitCode, SyncauthError, ValidationError, type FieldIssue } from '../../errors.js';
import { createLogger, type LogLevel, type Logger } from '../../log.js';
import { SECRET_FILE_NAME, secretFilesOf } from '../../credentials/file.js';
import { startSidecar, type Sidecar, type SidecarParts } from '../../daemon/sidecar.js';
import { exitSoon, holdSignals, reportReadiness, stopDuringStart, untilStopped, type HeldSignals } from '../../daemon/signals.js';
import { onePass } from '../../daemon/once.js';
import type { ProfileSinks } from '../../publish/token-file.js';
import { removeTemporaryLeftovers } from '../../profile/files.js';
import { openProfileStore, type ProfileStore } from '../../profile/index.js';
import { environmentGrant, handOver, loadDaemonProfiles } from '../../daemon/profiles.js';
import type { CommandContext } from '../context.js';
import { openSession, readSecrets } from '../session.js';
import { configFileLabel, notifyUrlFileLabel, withDaemonConfigFile, type ConfiguredDaemon, type DaemonCommandOptions } from '../daemon-config.js';
import { checkDaemonOptions, daemonOptionsOf, daemonStartedFields, type CheckedOptions, type DaemonInputs } from '../../daemon/spec.js';
import type { DaemonFileConfig } from '../../daemon/config-file.js';
import { planDaemonSinks, type SinkPlan } from '../../daemon/sink-plan.js';
import type { NotifySettings } from '../../notify/index.js';
import { notifySettingsOf, outboxKeyIssue, startNotifier } from './notify.js';
import { grantHook, grantKeyOf, openReauthStores, reauthLinkFor, reauthSettingIssues, startReauthPage, type ReauthStores } from '../reauth.js';

/** A temporary file this old is no write in progress (those take milliseconds): its writer died. */
const LEFTOVER_AGE_MS = 10_000;

/** How a setting was given, for error messages: the flag if it came from one, else its variable. */
function label(context: CommandContext, name: SettingName): string {
  const spec = SETTINGS[name] as { flag?: string; env: string };
  const fromFile = configFileLabel(context, name);
  if (fromFile) return fromFile;
  return context.settings.sources[name] === 'flag' && spec.flag ? `--${spec.flag}` : spec.env;
}

/** The daemon's options and settings checked by their entries in src/daemon/spec.ts, named as they were given. */
function checkSettings(context: CommandContext, options: DaemonCommandOptions): { checked: CheckedOptions; requested: string[] | undefined } {
  const v = context.settings.values;
  const issues: FieldIssue[] = [];
  const at = (name: SettingName) => label(context, name);
  const checked = checkDaemonOptions(v, options, at, issues, (name) => name !== 'profile');
  issues.push(...reauthSettingIssues(context, at, (options.notifyUrl?.length ?? 0) > 0 || Boolean(v.notifyUrl)));
  if (checked.fleet === true) issues.push(...fleetIssues(context, options.once === true));
  checkDaemonOptions(v, options, at, issues, (name) => name === 'profile');
  if (issues.length > 0) throw new ValidationError(issues);
  const requested = options.profile && options.profile.length > 0 ? [...new Set(options.profile)] : undefined;
  return { checked, requested };
}

/** Fleet mode shares profiles through Redis, and the next owner's grant through records sealed under the grant key. */
function fleetIssues(context: CommandContext, once: boolean): FieldIssue[] {
  const v = context.settings.values;
  const field = '--fleet';
  // One pass would renew only this replica's share and leave: the rest of the fleet's profiles are not its to renew.
  if (once) return [{ field, message: 'cannot be used with --once: a single pass of one replica would renew only its share of the profiles' }];
  if (!v.redisUrl) return [{ field, message: 'needs Redis to share the profiles among replicas: give --redis-url (or SYNCAUTH_REDIS_URL, daemon.redis_url)' }];
  if (v.grantKey === undefined) {
    return [{ field, message: `needs ${SETTINGS.grantKey.env} (32 random bytes in base64, the same in every replica): the fleet's records in Redis are authenticated under it, and a rotated refresh token reaches the next owner sealed under it` }];
  }
  return [];
}

/**
 * A daemon renews to hand the token on: to a token file, a template or the socket, to the profile's store (a
 * writable one keeps it for \`token\` and \`exec\`), or to the connector it reconciles. With none of those every
 * renewal is thrown away while the run looks healthy, so it is refused before anything starts (exit 2), naming
 * what is missing.
 */
function checkWorkToDo(context: CommandContext, options: DaemonCommandOptions, profiles: DaemonProfile[], ownSinks = false): void {
  const v = context.settings.values;
  const once = options.once === true;
  const sinks = ownSinks || Boolean(v.tokenFile) || (options.template?.length ?? 0) > 0 || (!once && Boolean(v.socket));
  if (sinks || profiles.some((profile) => profile.reconcile || profile.storeAccessToken)) return;
  const env = (name: SettingName) => SETTINGS[name].env;
  const reconcileNeeds = (['baseUrl', 'apiKey', 'remoteUrl'] as const).filter((name) => !v[name]);
  const missing = (reconcileNeeds.length > 0 ? reconcileNeeds : (['baseUrl', 'apiKey', 'remoteUrl'] as const)).map(env);
  const kept = v.store === 'env' ? 'the env store keeps nothing' : 'no profile has a store that keeps it';
  throw new SyncauthError(
    'SYNCAUTH_NOTHING_TO_DO',
    `daemon${once ? ' --once' : ''} has nothing to do: every token it renewed would be thrown away (${kept}; no token file, ` +
      `template${once ? '' : ' or socket'}; and no connector to update, for want of ${missing.join(', ')})`,
    {
      kind: 'bad_input',
      hint:
        `publish the token with --token-file (${env('tokenFile')}) or --template${once ? '' : `, or serve it with --socket (${env('socket')})`}; ` +
        `or set ${missing.join(', ')} to keep the connector's grant current; or run the consumer under \`${syncauthCommand('exec')}\`, which renews as it needs`,
    },
  );
}

/** The library names its options; the user knows the flag or variable they set. */
function relabel(context: CommandContext, error: unknown): unknown {
  if (!(error instanceof ValidationError)) return error;
  const names: Record<string, SettingName> = { listen: 'listen', reauthListen: 'reauthListen', tokenFile: 'tokenFile', schedule: 'sweep', renewMarginMs: 'renewMargin' };
  return new ValidationError(error.issues.map((issue) => {
    const name = names[issue.field];
    return name ? { ...issue, field: label(context, name) } : issue;
  }));
}

/**
 * The profiles to serve (src/daemon/profiles.ts), each session opened as the command opens one: a key asked
 * for at a terminal once, its notices on stderr.
 */
export function loadProfiles(context: CommandContext, store: ProfileStore, requested: string[] | undefined): Promise<ProfileEntry[]> {
  return loadDaemonProfiles(
    {
      values: context.settings.values,
      store,
      open: async (name, options) => {
        const session = await openSession(context, name, options);
        return { session, secrets: await readSecrets(session) };
      },
    },
    requested,
  );
}

/**
 * The sinks planned (src/daemon/sink-plan.ts), each named as the person gave it: the flag, the variable or the
 * configuration file's key.
 */
function planSinks(context: CommandContext, options: DaemonCommandOptions, names: string[], config: DaemonFileConfig | undefined, log: Logger): Promise<SinkPlan> {
  const v = context.settings.values;
  return planDaemonSinks({
    names,
    settings: v,
    templates: options.template ?? [],
    socketMode: options.socketMode,
    socketGroup: options.socketGroup,
    once: options.once === true,
    listen: [
      { listen: v.listen, field: label(context, 'listen') },
      { listen: v.publicUrl ? v.reauthListen : undefined, field: label(context, 'reauthListen') },
    ],
    config,
    fields: {
      tokenFile: label(context, 'tokenFile'),
      tokenFilePath: '--token-file or SYNCAUTH_TOKEN_FILE',
      tokenFileMode: label(context, 'tokenFileMode'),
      tokenFileGroup: label(context, 'tokenFileGroup'),
      socket: label(context, 'socket'),
      socketPath: '--socket or SYNCAUTH_SOCKET',
    },
    log,
  });
}

export async function daemon(given: CommandContext, givenOptions: DaemonCommandOptions = {}): Promise<void> {
  const held = holdSignals();
  try {
    await runDaemon(given, givenOptions, held);
  } finally {
    held.release();
  }
}

async function runDaemon(given: CommandContext, givenOptions: DaemonCommandOptions, held: HeldSignals): Promise<void> {
  // --config FILE: its keys join the settings and options; flags and variables win (see src/cli/daemon-config.ts).
  const configured = await withDaemonConfigFile(given, givenOptions);
  const { context, options } = configured;
  const v = context.settings.values;
  const once = options.once === true;
  const { checked, requested, notify, log } = checkAll(configured);
  const store = openProfileStore(v.configDir);
  // The profiles a reload (SIGHUP) serves are the configuration file's of then.
  const served = { requested };
  const load = () => loadProfiles(context, store, served.requested);
  const starting = await startingProfiles(configured, load, held, log);
  if (!starting) return;
  const { names, profiles } = starting;
  const sinks = await planSinks(context, options, names, configured.config, log);
  const inputs = { values: v, checked, sinks, once };

  // The parts, started in order as one group (see src/daemon/sidecar.ts): a part that fails to start, or a stop
  // during the start, closes those started before it.
  const sidecar = await startSidecar(sidecarParts({ context, log, held, notify, names, store, profiles, inputs }));
  if (!sidecar) return;
  try {
    if (once) return await passOnce(sidecar, log, context, held);
    await serve({ running: sidecar.daemon, log, held, notify, names, inputs, configured, store, served });
  } finally {
    await sidecar.close();
  }
  // Everything was closed; should a stray handle keep the event loop alive, do not hang the container's stop.
  exitSoon();
}

/** One pass (--once): renew what is due, reconcile, publish, then exit with what the pass found. */
async function passOnce(sidecar: Sidecar<Notifier>, log: Logger, context: CommandContext, held: HeldSignals): Promise<void> {
  held.release();
  try {
    await onePass(sidecar.daemon, log, context.io.stderr, () => sidecar.sinks.release());
  } finally {
    // What the pass noticed is tried once now; what is not delivered waits in the outbox for the next run.
    await sidecar.notifier?.tick();
  }
}

interface Serving {
  running: RunningDaemon;
  log: Logger;
  held: HeldSignals;
  notify: NotifySettings | undefined;
  names: string[];
  inputs: DaemonInputs & { sinks: SinkPlan };
  configured: ConfiguredDaemon;
  store: ProfileStore;
  /** The profiles asked for, which a reload of the configuration file may change. */
  served: { requested: string[] | undefined };
}

/** The running daemon, said started, serving until stopped; SIGHUP reloads. */
async function serve({ running, log, held, notify, names, inputs, configured, store, served }: Serving): Promise<void> {
  log.info(
    {
      event: 'daemon.started',
      op: 'start',
      profiles: names,
      ...daemonStartedFields(inputs, running),
      ...(notify ? { notify: notify.targets.map((target) => target.url.origin), notifyFormat: notify.format } : {}),
    },
    `syncauth daemon started for ${names.length === 1 ? `profile ${names[0]}` : `${names.length} profiles`}`,
  );
  const readiness = reportReadiness(running, log);
  // SIGHUP reads the configuration file again first: rejected, nothing changes; accepted, its profiles are served
  // with their own sinks.
  const reconfigure = async (): Promise<{ profileSinks?: Map<string, ProfileSinks> } | false> => {
    // The profiles the reload will serve, as loadProfiles finds them (none stored: the environment's one).
    const servedNames = async (asked: string[] | undefined): Promise<string[]> => {
      const found = asked ?? (await store.names());
      return found.length > 0 ? found : [configured.context.settings.values.profile];
    };
    const next = await configured.reread(log, servedNames, inputs.sinks.sharedTokenFile);
    if (next === false) return false;
    if (next) served.requested = next.requested;
    return next ? { profileSinks: next.profileSinks } : {};
  };
  // From here the running handlers take the signals; one that came during the start is acted on at once.
  held.release();
  await untilStopped(running, log, readiness, reconfigure, held);
}

/**
 * Every setting and option checked before anything starts (a bad URL or secret is exit 2, with nothing sent or
 * written), then the log opened: the file's keys that flags override, and a config dir moved, said once.
 */
function checkAll(configured: ConfiguredDaemon): ReturnType<typeof checkSettings> & { notify: NotifySettings | undefined; log: Logger } {
  const { context, options } = configured;
  const v = context.settings.values;
  const settings = checkSettings(context, options);
  const notify = notifySettingsOf(context, options, label(context, 'notifyFormat'), notifyUrlFileLabel(options));
  const outboxIssues = outboxKeyIssue(notify, context);
  if (outboxIssues.length > 0) throw new ValidationError(outboxIssues);
  const log = createLogger({ level: v.logLevel as LogLevel, secretHeaders: [v.apiKeyHeader] });
  configured.report(log);
  const movedBecause = context.settings.configDirVerdict?.movedBecause;
  if (movedBecause) log.info({ event: 'daemon.config_dir', op: 'start', dir: v.configDir }, `the state lives in ${v.configDir}, a directory of this user's own, because ${movedBecause}`);
  return { ...settings, notify, log };
}

/**
 * The profiles loaded for the start's checks, handed to the daemon as it starts (a reload, SIGHUP, loads them
 * anew: loading them a second time read every profile twice at start and held both sets for the daemon's life).
 * Nothing but the daemon keeps them after: a fleet replica lets go of the profiles it does not serve.
 */
async function startingProfiles(
  configured: ConfiguredDaemon,
  load: () => Promise<ProfileEntry[]>,
  held: HeldSignals,
  log: Logger,
): Promise<{ names: string[]; profiles: () => Promise<ProfileEntry[]> } | undefined> {
  const { context, options } = configured;
  const initial = await loadServed(load, held, log, options.once === true);
  if (!initial) return undefined;
  const names = initial.map((entry) => entry.name);
  if (!initial.some(isLoadFailure)) checkWorkToDo(context, options, initial as DaemonProfile[], names.some((name) => configured.config?.profileSinks[name]));
  return { names, profiles: handOver(initial, load) };
}

/** The profiles to serve at start; undefined when a stop came meanwhile. None, or none loaded, refuses the start. */
async function loadServed(load: () => Promise<ProfileEntry[]>, held: HeldSignals, log: Logger, once: boolean): Promise<ProfileEntry[] | undefined> {
  log.debug({ event: 'daemon.starting', op: 'start' }, 'loading the profiles');
  const initial = await load();
  if (await stopDuringStart(held, log, once)) return undefined;
  if (initial.length === 0) {
    throw new SyncauthError('SYNCAUTH_NO_PROFILES', 'there is no profile to serve: no profile is stored and the environment holds no Dropbox grant', {
      exitCode: ExitCode.authRequired,
      hint: `run \`${syncauthCommand('setup')}\` first, or set SYNCAUTH_APP_KEY, SYNCAUTH_APP_SECRET and SYNCAUTH_REFRESH_TOKEN (plus SYNCAUTH_BASE_URL, SYNCAUTH_API_KEY and SYNCAUTH_REMOTE_URL to reconcile a connector)`,
    });
  }
  const failed = initial.filter(isLoadFailure);
  if (failed.length === initial.length) throw (failed[0] as { error: Error }).error;
  return initial;
}

type Notifier = NonNullable<Awaited<ReturnType<typeof startNotifier>>>;

interface PartsOf {
  context: CommandContext;
  log: Logger;
  held: HeldSignals;
  notify: NotifySettings | undefined;
  names: string[];
  store: ProfileStore;
  /** The profiles the daemon starts with (handed over once), then each reload's. */
  profiles: () => Promise<ProfileEntry[]>;
  inputs: DaemonInputs & { sinks: SinkPlan };
}

/** The sidecar's parts (src/daemon/sidecar.ts starts them in order): the sinks' locks, the coordinator, the page's stores, the notifier, the page, the daemon. */
function sidecarParts({ context, log, held, notify, names, store, profiles, inputs }: PartsOf): SidecarParts<ReauthStores, Notifier> {
  const v = context.settings.values;
  const once = inputs.once;
  // The token checks' records in Redis are authenticated under the grant key; without it each replica checks for itself.
  const grantKey = grantKeyOf(context);
  return {
    log,
    once,
    signals: held,
    // Every sink is this run's alone before anything is published, adopted or rendered: one another running
    // process holds refuses the start (exit 2), naming it (see src/publish/sink-lock.ts).
    sinks: () => inputs.sinks.lock(),
    prepare: async () => {
      // A daemon restarted after kill -9 clears what interrupted writes of state and secrets left behind.
      await removeTemporaryLeftovers([...names.flatMap((name) => [store.fileOf(name), ...secretFilesOf(v.configDir, name)]), path.join(v.configDir, SECRET_FILE_NAME)], LEFTOVER_AGE_MS);
      if (names.length > 1 && environmentGrant(v)) {
        log.warn({ event: 'daemon.environment_grant', op: 'start' }, 'SYNCAUTH_APP_KEY, SYNCAUTH_APP_SECRET and SYNCAUTH_REFRESH_TOKEN are set in the environment: they take precedence over the stored grant of every profile served');
      }
    },
    ...(v.redisUrl ? { coordinator: () => createRedisCoordinator({ url: v.redisUrl as string, logger: log, ...(grantKey ? { grantKey } : {}) }) } : {}),
    // A one-shot run serves no page.
    ...(once ? {} : { stores: () => openReauthStores(context, log) }),
    ...(notify
      ? {
          notifier: async (stores: ReauthStores | undefined, isResolved: (profile: string) => boolean) => {
            // With the re-authorization page on, each ask carries a fresh link to it.
            const linkFor = await reauthLinkFor(context, stores);
            return startNotifier(notify, { configDir: v.configDir, redisUrl: v.redisUrl, ...(v.redisUrl ? { redisWhere: redisTarget(v.redisUrl) } : {}), ...(grantKey ? { grantKey } : {}), log, isResolved, ...(linkFor ? { linkFor } : {}) });
          },
        }
      : {}),
    beforeServing: () => {
      if (once && (v.listen || v.socket)) log.info({ event: 'daemon.once', op: 'start' }, '--once serves nothing: the health listener and the socket are not started');
    },
    // The page's listener too is opened before anything is published: a port in use refuses a start that has
    // touched nothing.
    page: (starting, stores) => relabeled(context, () => startReauthPage(context, starting, log, stores)),
    daemon: ({ sinks: sinkLocks, coordinator, notifier }) =>
      relabeled(context, () =>
        startDaemon({
          profiles,
          loadProfile: async (name) => (await loadProfiles(context, store, [name]))[0] ?? { name, error: new Error(`profile "${name}" is gone`) },
          profileStore: store,
          ...daemonOptionsOf(inputs),
          sinkLocks,
          ...(coordinator ? { coordinator } : {}),
          ...(notifier ? { notices: notifier } : {}),
          ...(grantKey ? { grantKey } : {}),
          ...(v.onReauthorized && !once ? { onReauthorized: grantHook(context, v.onReauthorized, log) } : {}),
          logger: log,
        }),
      ),
  };
}

/** Runs `start`; a ValidationError it throws names the flags and variables the user set (see `relabel`). */
async function relabeled<T>(context: CommandContext, start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (error) {
    throw relabel(context, error);
  }
}
