// `syncauth daemon`: the sidecar. Resolves the profiles (every stored one, those named with --profile, or one
// made entirely of environment variables in a container), checks every setting before anything starts, and
// turns signals into a graceful stop (SIGTERM, SIGINT) or a reload (SIGHUP).
import { syncauthCommand } from '../../profile/name.js';
import path from 'node:path';
import { SETTINGS, type SettingName } from '../../config.js';
import {
  checkRedisUrl,
  checkSchedule,
  createRedisCoordinator,
  parseCheckInterval,
  parseChecksPerSecond,
  isLoadFailure,
  reauthorizeCommand,
  redisTarget,
  startDaemon,
  tokenFileFor,
  type DaemonProfile,
  type ProfileEntry,
  type RunningDaemon,
} from '../../daemon/index.js';
import { ExitCode, SyncauthError, ValidationError, type FieldIssue } from '../../errors.js';
import { createLogger, type LogLevel, type Logger } from '../../log.js';
import { SECRET_FILE_NAME, secretFilesOf } from '../../credentials/file.js';
import { notifySystemd } from '../../daemon/systemd.js';
import { PRIVATE_ACCESS, parseMode, parseSocketMode, resolveGroup, type FileAccess } from '../../publish/file.js';
import { checkTokenFilePlaces, type ProfileSinks } from '../../publish/token-file.js';
import { checkTemplate, parseTemplateFlag, type TemplateSpec } from '../../publish/template.js';
import { placeSinks, PLACE_RULE, type SinkRequest } from '../../publish/place.js';
import { removeTemporaryLeftovers } from '../../profile/files.js';
import { isProfileName, openProfileStore, type ProfileStore } from '../../profile/index.js';
import { environmentGrant, handOver, loadDaemonProfiles } from '../../daemon/profiles.js';
import type { CommandContext } from '../context.js';
import { openSession, readSecrets } from '../session.js';
import { configFileLabel, notifyUrlFileLabel, prepareProfileSinks, withDaemonConfigFile, type DaemonCommandOptions } from '../daemon-config.js';
import { checkPortsFree, lockDaemonSinks, refuseHeldSinks } from '../daemon-sinks.js';
import { checkSocketPath } from '../../publish/socket.js';
import type { SinkLocks } from '../../publish/sink-lock.js';
import { notifySettingsOf, outboxKeyIssue, startNotifier } from './notify.js';
import { grantHook, grantKeyOf, openReauthStores, reauthLinkFor, reauthSettingIssues, startReauthPage } from '../reauth.js';

/** A temporary file this old is no write in progress (those take milliseconds): its writer died. */
const LEFTOVER_AGE_MS = 10_000;

/** How the token is handed to consumers besides the token file's path: checked before anything starts. */
interface Handover {
  tokenFileAccess?: FileAccess;
  templates: TemplateSpec[];
  socket?: { path: string; mode?: number; gid?: number };
}

/** A ValidationError's issues join `issues`, so that every bad setting is named at once; any other error is thrown. */
function absorbIssues(issues: FieldIssue[], error: unknown): undefined {
  if (!(error instanceof ValidationError)) throw error;
  issues.push(...error.issues);
  return undefined;
}

async function checkHandover(context: CommandContext, options: DaemonCommandOptions, names: string[]): Promise<Handover> {
  const v = context.settings.values;
  const issues: FieldIssue[] = [];
  const attempt = async <T>(check: () => T | Promise<T>): Promise<T | undefined> => {
    try {
      return await check();
    } catch (error) {
      return absorbIssues(issues, error);
    }
  };
  const fileMode = v.tokenFileMode === undefined ? undefined : await attempt(() => parseMode(v.tokenFileMode as string, label(context, 'tokenFileMode')));
  const fileGroup = v.tokenFileGroup === undefined ? undefined : await attempt(() => resolveGroup(v.tokenFileGroup as string, label(context, 'tokenFileGroup')));
  if ((v.tokenFileMode !== undefined || v.tokenFileGroup !== undefined) && !v.tokenFile) {
    issues.push({ field: label(context, v.tokenFileMode !== undefined ? 'tokenFileMode' : 'tokenFileGroup'), message: 'needs a token file (--token-file or SYNCAUTH_TOKEN_FILE)' });
  }
  const templates: TemplateSpec[] = [];
  for (const raw of options.template ?? []) {
    const spec = await attempt(() => parseTemplateFlag(raw, '--template'));
    if (!spec) continue;
    await attempt(() => checkTemplate(spec, names, '--template'));
    templates.push(spec);
  }
  const socketMode = options.socketMode === undefined ? undefined : await attempt(() => parseSocketMode(options.socketMode as string, '--socket-mode'));
  const socketGroup = options.socketGroup === undefined ? undefined : await attempt(() => resolveGroup(options.socketGroup as string, '--socket-group'));
  if ((options.socketMode !== undefined || options.socketGroup !== undefined) && !v.socket) {
    issues.push({ field: options.socketMode !== undefined ? '--socket-mode' : '--socket-group', message: 'needs a socket (--socket or SYNCAUTH_SOCKET)' });
  }
  if (issues.length > 0) throw new ValidationError(issues);
  return {
    ...(fileMode !== undefined || fileGroup !== undefined ? { tokenFileAccess: { mode: fileMode ?? PRIVATE_ACCESS.mode, ...(fileGroup !== undefined ? { gid: fileGroup } : {}) } } : {}),
    templates,
    ...(v.socket ? { socket: { path: v.socket, ...(socketMode !== undefined ? { mode: socketMode } : {}), ...(socketGroup !== undefined ? { gid: socketGroup } : {}) } } : {}),
  };
}

/**
 * Every sink whose directory other users may write moves into the daemon's own subdirectory there (see
 * src/publish/place.ts); one that cannot (that subdirectory is someone else's, or a link) is refused with exit 2.
 * Returns the token file's path as it will be written, and updates the handover's paths.
 */
async function placeHandover(context: CommandContext, log: Logger, tokenFile: string | undefined, handover: Handover, names: string[], once: boolean): Promise<string | undefined> {
  const requests: SinkRequest[] = [];
  const gid = handover.tokenFileAccess?.gid;
  if (tokenFile) requests.push({ path: tokenFile, field: label(context, 'tokenFile'), ...(gid !== undefined ? { gid } : {}) });
  for (const spec of handover.templates) requests.push({ path: spec.dest, field: '--template' });
  // One pass serves no socket, so makes no place for it.
  const socket = once ? undefined : handover.socket;
  if (socket) requests.push({ path: socket.path, field: label(context, 'socket'), ...(socket.gid !== undefined ? { gid: socket.gid } : {}) });
  const placed = await placeSinks(requests, (template) => [...new Set(names.map((name) => tokenFileFor(template, name)))]);
  placed.forEach((sink, i) => {
    const request = requests[i] as SinkRequest;
    if (sink.movedBecause === undefined) return;
    log.info(
      { event: 'sink.moved', op: 'start', field: request.field, configured: request.path, path: sink.path, reason: sink.movedBecause },
      `${request.field}: ${sink.movedBecause}, so ${request.path} is published as ${sink.path} (${PLACE_RULE})`,
    );
  });
  let next = 0;
  const take = (): string => (placed[next++] as { path: string }).path;
  const file = tokenFile ? take() : undefined;
  handover.templates = handover.templates.map((spec) => ({ ...spec, dest: take() }));
  if (socket) socket.path = take();
  return file;
}

interface DaemonSettings {
  marginMs: number;
  sweep: string;
  concurrency: number;
  maxRenewalsPerSecond: number | undefined;
  checkIntervalMs: number | undefined;
  maxChecksPerSecond: number | undefined;
  shutdownTimeoutMs: number;
  requested: string[] | undefined;
}

/** The token checks as the start line says them: how often, and so how long a revoked grant may go unnoticed. */
function checksLogged(running: RunningDaemon): Record<string, unknown> {
  const checks = running.status().checks;
  if (!checks) return { checks: 'off' };
  return { checkIntervalSeconds: checks.intervalSeconds, maxChecksPerSecond: checks.maxPerSecond, revocationNoticedWithinSeconds: checks.noticeWithinSeconds };
}

/** How a setting was given, for error messages: the flag if it came from one, else its variable. */
function label(context: CommandContext, name: SettingName): string {
  const spec = SETTINGS[name] as { flag?: string; env: string };
  const fromFile = configFileLabel(context, name);
  if (fromFile) return fromFile;
  return context.settings.sources[name] === 'flag' && spec.flag ? `--${spec.flag}` : spec.env;
}

function checkSettings(context: CommandContext, options: DaemonCommandOptions): DaemonSettings {
  const v = context.settings.values;
  const issues: FieldIssue[] = [];
  const attempt = (check: () => void): void => {
    try {
      check();
    } catch (error) {
      absorbIssues(issues, error);
    }
  };
  attempt(() => checkSchedule(v.sweep, label(context, 'sweep')));
  if (v.redisUrl !== undefined) attempt(() => checkRedisUrl(v.redisUrl as string, label(context, 'redisUrl')));

  const whole = (raw: string | undefined, fallback: number, min: number, max: number, field: string): number => {
    if (raw === undefined) return fallback;
    if (!/^\d+$/.test(raw.trim()) || Number(raw) < min || Number(raw) > max) {
      issues.push({ field, message: `must be a whole number from ${min} to ${max}` });
      return fallback;
    }
    return Number(raw);
  };
  const concurrency = whole(options.concurrency, 4, 1, 1000, '--concurrency');
  const shutdownSeconds = whole(options.shutdownTimeout, 10, 1, 600, '--shutdown-timeout');
  let maxRenewalsPerSecond: number | undefined;
  if (options.maxRenewalsPerSecond !== undefined) {
    const value = Number(options.maxRenewalsPerSecond);
    if (options.maxRenewalsPerSecond.trim() === '' || !Number.isFinite(value) || value <= 0) {
      issues.push({ field: '--max-renewals-per-second', message: 'must be a number above 0, like 5 or 0.5' });
    } else {
      maxRenewalsPerSecond = value;
    }
  }
  const parsed = <T>(raw: string | undefined, field: string, parse: (raw: string) => T): T | undefined => {
    if (raw === undefined) return undefined;
    try {
      return parse(raw);
    } catch (error) {
      issues.push({ field, message: (error as Error).message });
      return undefined;
    }
  };
  const checkIntervalMs = parsed(options.checkInterval, '--check-interval', parseCheckInterval);
  const maxChecksPerSecond = parsed(options.maxChecksPerSecond, '--max-checks-per-second', parseChecksPerSecond);
  issues.push(...reauthSettingIssues(context, (name) => label(context, name), (options.notifyUrl?.length ?? 0) > 0 || Boolean(v.notifyUrl)));
  const requested = options.profile && options.profile.length > 0 ? [...new Set(options.profile)] : undefined;
  for (const name of requested ?? []) {
    if (!isProfileName(name)) {
      issues.push({ field: '--profile', message: 'must be 1-64 letters, digits, dot, dash or underscore, starting with a letter or digit' });
      break;
    }
  }
  if (issues.length > 0) throw new ValidationError(issues);
  return { marginMs: v.renewMargin * 1000, sweep: v.sweep, concurrency, maxRenewalsPerSecond, checkIntervalMs, maxChecksPerSecond, shutdownTimeoutMs: shutdownSeconds * 1000, requested };
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

async function checkTokenFiles(context: CommandContext, template: string, names: string[]): Promise<void> {
  await checkTokenFilePlaces(template, names, label(context, 'tokenFile'));
}

/**
 * SIGTERM, SIGINT and SIGHUP while the daemon starts (reading the configuration, loading profiles, starting the
 * listeners), before its running handlers are in place: without this, Node's default action ends the process
 * mid-write, leaving a lock directory or a temporary file behind. A stop is remembered and honoured at the next
 * step of the start (what was started is closed cleanly); a reload is done once started. A second stop signal
 * exits at once, as it does later.
 */
interface HeldSignals {
  stop?: NodeJS.Signals;
  /** Settles when a stop signal arrives: a wait of the start (Redis answering) races it. */
  stopped: Promise<void>;
  reload: boolean;
  release(): void;
  /** The sinks' locks, once taken; given back when the run ends, however it ends. */
  sinkLocks?: SinkLocks;
}

function holdSignals(): HeldSignals {
  let stopped = (): void => undefined;
  const held: HeldSignals = {
    stopped: new Promise<void>((resolve) => (stopped = resolve)),
    reload: false,
    release: () => {
      process.off('SIGTERM', onStop);
      process.off('SIGINT', onStop);
      process.off('SIGHUP', onReload);
    },
  };
  const onStop = (signal: NodeJS.Signals): void => {
    if (held.stop) process.exit(ExitCode.error);
    held.stop = signal;
    stopped();
  };
  const onReload = (): void => {
    held.reload = true;
  };
  process.on('SIGTERM', onStop);
  process.on('SIGINT', onStop);
  process.on('SIGHUP', onReload);
  return held;
}

/** The exit code of a one-shot run that a signal stopped, as the shell reports it (the daemon proper exits 0). */
const ONCE_STOPPED: Partial<Record<NodeJS.Signals, number>> = { SIGINT: 130, SIGTERM: 143 };

export async function daemon(given: CommandContext, givenOptions: DaemonCommandOptions = {}): Promise<void> {
  const held = holdSignals();
  try {
    await runDaemon(given, givenOptions, held);
  } finally {
    held.release();
    await held.sinkLocks?.release();
  }
}

async function runDaemon(given: CommandContext, givenOptions: DaemonCommandOptions, held: HeldSignals): Promise<void> {
  // --config FILE: its keys join the settings and options; flags and variables win (see src/cli/daemon-config.ts).
  const configured = await withDaemonConfigFile(given, givenOptions);
  const { context, options } = configured;
  const v = context.settings.values;
  const settings = checkSettings(context, options);
  // Checked before anything starts: a bad URL or secret is exit 2, with nothing sent or written.
  const notify = notifySettingsOf(context, options, label(context, 'notifyFormat'), notifyUrlFileLabel(options));
  const outboxIssues = outboxKeyIssue(notify, context);
  if (outboxIssues.length > 0) throw new ValidationError(outboxIssues);
  const log = createLogger({ level: v.logLevel as LogLevel, secretHeaders: [v.apiKeyHeader] });
  configured.report(log);
  const movedBecause = context.settings.configDirVerdict?.movedBecause;
  if (movedBecause) log.info({ event: 'daemon.config_dir', op: 'start', dir: v.configDir }, `the state lives in ${v.configDir}, a directory of this user's own, because ${movedBecause}`);
  const store = openProfileStore(v.configDir);
  const load = () => loadProfiles(context, store, settings.requested);

  const once = options.once === true;
  /** A stop asked for during the start: log it, close what was started, and end the run (true) as a stop would. */
  const stoppedDuringStart = async (close: () => Promise<void> = async () => undefined): Promise<boolean> => {
    const signal = held.stop;
    if (!signal) return false;
    log.info({ event: 'daemon.stopping', op: 'stop', signal, during: 'start' }, `${signal} while starting: stopping before serving`);
    await close().catch((error: unknown) => log.error({ event: 'daemon.stop_failed', op: 'stop', err: error }, 'shutdown was not clean'));
    log.info({ event: 'daemon.stopped', op: 'stop' }, 'stopped');
    if (once) {
      await held.sinkLocks?.release().catch(() => undefined);
      process.exit(ONCE_STOPPED[signal] ?? ExitCode.error);
    }
    // As after a later stop: a wait the start left pending (Redis's connection) must not hold the exit up.
    setTimeout(() => process.exit(process.exitCode ?? ExitCode.ok), 2_000).unref();
    return true;
  };
  log.debug({ event: 'daemon.starting', op: 'start' }, 'loading the profiles');
  const initial: ProfileEntry[] = await load();
  if (await stoppedDuringStart()) return;
  if (initial.length === 0) {
    throw new SyncauthError('SYNCAUTH_NO_PROFILES', 'there is no profile to serve: no profile is stored and the environment holds no Dropbox grant', {
      exitCode: ExitCode.authRequired,
      hint: `run \`${syncauthCommand('setup')}\` first, or set SYNCAUTH_APP_KEY, SYNCAUTH_APP_SECRET and SYNCAUTH_REFRESH_TOKEN (plus SYNCAUTH_BASE_URL, SYNCAUTH_API_KEY and SYNCAUTH_REMOTE_URL to reconcile a connector)`,
    });
  }
  const failed = initial.filter(isLoadFailure);
  if (failed.length === initial.length) throw (failed[0] as { error: Error }).error;
  const names = initial.map((entry) => entry.name);
  // A profile's own token file (the configuration file's profiles.NAME.sinks) replaces the daemon-wide one for it.
  const ownTokenFile = (name: string) => configured.config?.profileSinks[name]?.token_file !== undefined;
  if (failed.length === 0) checkWorkToDo(context, options, initial as DaemonProfile[], names.some((name) => configured.config?.profileSinks[name]));
  if (v.tokenFile) await checkTokenFiles(context, v.tokenFile, names.filter((name) => !ownTokenFile(name)));
  const handover = await checkHandover(context, options, names);
  // A sink another running process holds, then a port in use, refuse the start before a sink's private
  // subdirectory is made (placeHandover).
  await refuseHeldSinks({
    names,
    tokenFile: v.tokenFile,
    tokenFileField: label(context, 'tokenFile'),
    templates: handover.templates,
    config: configured.config,
    ...(handover.socket && !once ? { socket: { path: handover.socket.path, field: label(context, 'socket') } } : {}),
  });
  if (!once) {
    await checkPortsFree([
      { listen: v.listen, field: label(context, 'listen') },
      { listen: v.publicUrl ? v.reauthListen : undefined, field: label(context, 'reauthListen') },
    ]);
  }
  const tokenFile = await placeHandover(context, log, v.tokenFile, handover, names, options.once === true);
  const sharedTokenFile = (name: string) => (tokenFile ? tokenFileFor(tokenFile, name) : undefined);
  const profileSinks = await prepareProfileSinks(configured.config, names, log, sharedTokenFile);
  // The socket's path, then the sinks' locks: a refusal before any of them has made nothing.
  if (handover.socket && !once) await checkSocketPath(handover.socket.path);
  // Every sink is this run's alone before anything is published, adopted or rendered: one another running
  // process holds refuses the start (exit 2), naming it (see src/publish/sink-lock.ts).
  const sinkLocks = (held.sinkLocks = await lockDaemonSinks({
    names,
    sharedTokenFile: (name) => (ownTokenFile(name) ? undefined : sharedTokenFile(name)),
    tokenFileField: label(context, 'tokenFile'),
    templates: handover.templates,
    profileSinks,
    ...(handover.socket && !once ? { socket: { path: handover.socket.path, field: label(context, 'socket') } } : {}),
  }));
  // A daemon restarted after kill -9 clears what interrupted writes of state and secrets left behind.
  await removeTemporaryLeftovers([...names.flatMap((name) => [store.fileOf(name), ...secretFilesOf(v.configDir, name)]), path.join(v.configDir, SECRET_FILE_NAME)], LEFTOVER_AGE_MS);
  if (names.length > 1 && environmentGrant(v)) {
    log.warn({ event: 'daemon.environment_grant', op: 'start' }, 'SYNCAUTH_APP_KEY, SYNCAUTH_APP_SECRET and SYNCAUTH_REFRESH_TOKEN are set in the environment: they take precedence over the stored grant of every profile served');
  }

  const grantKey = grantKeyOf(context);
  // The token checks' records in Redis are authenticated under the grant key; without it each replica checks for itself.
  const coordinator = v.redisUrl ? await createRedisCoordinator({ url: v.redisUrl, logger: log, ...(grantKey ? { grantKey } : {}) }) : undefined;
  // A replica that starts while Redis is away still starts: it renews nothing, says so, and reports not ready.
  // A stop during that wait need not sit it out.
  await Promise.race([coordinator?.ready().catch(() => undefined), held.stopped]);
  // A reminder of a profile this daemon renews again (set up anew while no daemon ran) ends instead of asking.
  const served: { daemon?: RunningDaemon } = {};
  const isResolved = (profile: string): boolean => served.daemon?.status().profiles.find((p) => p.name === profile)?.ready === true;
  // With the re-authorization page on, each ask carries a fresh link to it (a one-shot run serves no page).
  const reauthStores = once ? undefined : await openReauthStores(context, log);
  const linkFor = notify ? await reauthLinkFor(context, reauthStores) : undefined;
  const notifier = notify
    ? await startNotifier(notify, { configDir: v.configDir, redisUrl: v.redisUrl, ...(v.redisUrl ? { redisWhere: redisTarget(v.redisUrl) } : {}), ...(grantKey ? { grantKey } : {}), log, isResolved, ...(linkFor ? { linkFor } : {}) })
    : undefined;

  if (once && (v.listen || v.socket)) log.info({ event: 'daemon.once', op: 'start' }, '--once serves nothing: the health listener and the socket are not started');
  if (await stoppedDuringStart(async () => {
    await notifier?.close();
    await coordinator?.close();
  })) return;
  // The page's listener too is opened before anything is published: a port in use refuses a start that has
  // touched nothing. Until the daemon runs, it knows no profile.
  let closeReauth: (() => Promise<void>) | undefined;
  try {
    const starting = {
      status: () => served.daemon?.status() ?? { ready: false, profiles: [] },
      reauthorized: (name: string, grant: Parameters<RunningDaemon['reauthorized']>[1]) =>
        served.daemon ? served.daemon.reauthorized(name, grant) : Promise.resolve({ stored: false, error: 'the daemon is starting' }),
    } as RunningDaemon;
    closeReauth = await startReauthPage(context, starting, log, reauthStores);
  } catch (error) {
    await notifier?.close();
    await reauthStores?.close();
    await coordinator?.close();
    throw relabel(context, error);
  }
  let running: RunningDaemon;
  try {
    running = await startDaemon({
      // The profiles loaded above start the daemon; a reload (SIGHUP) loads them anew. Loading them a second
      // time here read every profile twice at start and held both sets for the daemon's life.
      profiles: handOver(initial, load),
      loadProfile: async (name) => (await loadProfiles(context, store, [name]))[0] ?? { name, error: new Error(`profile "${name}" is gone`) },
      profileStore: store,
      renewMarginMs: settings.marginMs,
      // One pass runs no schedule: the sweep below is the whole of it.
      schedule: once ? false : settings.sweep,
      sweepOnStart: !once,
      concurrency: settings.concurrency,
      ...(settings.maxRenewalsPerSecond !== undefined ? { maxRenewalsPerSecond: settings.maxRenewalsPerSecond } : {}),
      ...(settings.checkIntervalMs !== undefined ? { checkIntervalMs: settings.checkIntervalMs } : {}),
      ...(settings.maxChecksPerSecond !== undefined ? { maxChecksPerSecond: settings.maxChecksPerSecond } : {}),
      ...(tokenFile ? { tokenFile } : {}),
      ...(handover.tokenFileAccess ? { tokenFileAccess: handover.tokenFileAccess } : {}),
      ...(handover.templates.length > 0 ? { templates: handover.templates } : {}),
      ...(profileSinks.size > 0 ? { profileSinks } : {}),
      ...(handover.socket && !once ? { socket: handover.socket } : {}),
      ...(v.listen && !once ? { listen: v.listen } : {}),
      sinkLocks,
      ...(coordinator ? { coordinator } : {}),
      ...(notifier ? { notices: notifier } : {}),
      ...(grantKey ? { grantKey } : {}),
      ...(v.onReauthorized && !once ? { onReauthorized: grantHook(context, v.onReauthorized, log) } : {}),
      connectorFailingAfterMs: v.notifyConnectorFailingAfter * 1000,
      shutdownTimeoutMs: settings.shutdownTimeoutMs,
      logger: log,
    });
  } catch (error) {
    await closeReauth?.().catch(() => undefined);
    await notifier?.close();
    await reauthStores?.close();
    await coordinator?.close();
    throw relabel(context, error);
  }
  served.daemon = running;
  if (once) {
    if (await stoppedDuringStart(async () => {
      await running.close();
      await notifier?.close();
    })) return;
    held.release();
    try {
      await onePass(context, running, log, () => held.sinkLocks?.release());
    } finally {
      // What the pass noticed is tried once now; what is not delivered waits in the outbox for the next run.
      await notifier?.tick();
      await notifier?.close();
    }
    return;
  }
  log.info(
    {
      event: 'daemon.started',
      op: 'start',
      profiles: names,
      sweep: settings.sweep,
      renewMarginSeconds: v.renewMargin,
      concurrency: settings.concurrency,
      ...(settings.maxRenewalsPerSecond !== undefined ? { maxRenewalsPerSecond: settings.maxRenewalsPerSecond } : {}),
      ...checksLogged(running),
      ...(tokenFile ? { tokenFile } : {}),
      ...(handover.templates.length > 0 ? { templates: handover.templates.map((t) => t.dest) } : {}),
      ...(profileSinks.size > 0 ? { profileSinks: Object.fromEntries([...profileSinks].map(([name, own]) => [name, { tokenFile: own.tokenFile, templates: own.templates?.map((t) => t.dest) }])) } : {}),
      ...(handover.socket ? { socket: handover.socket.path } : {}),
      ...(running.url ? { listen: running.url } : {}),
      ...(v.redisUrl ? { redis: redisTarget(v.redisUrl) } : {}),
      ...(notify ? { notify: notify.targets.map((target) => target.url.origin), notifyFormat: notify.format } : {}),
    },
    `syncauth daemon started for ${names.length === 1 ? `profile ${names[0]}` : `${names.length} profiles`}`,
  );
  const readiness = reportReadiness(running, log);
  // SIGHUP reads the configuration file again first: rejected, nothing changes; accepted, its profiles are served
  // with their own sinks.
  const reconfigure = async (): Promise<{ profileSinks?: Map<string, ProfileSinks> } | false> => {
    // The profiles the reload will serve, as loadProfiles finds them (none stored: the environment's one).
    const served = async (requested: string[] | undefined): Promise<string[]> => {
      const found = requested ?? (await store.names());
      return found.length > 0 ? found : [v.profile];
    };
    const next = await configured.reread(log, served, sharedTokenFile);
    if (next === false) return false;
    if (next) settings.requested = next.requested;
    return next ? { profileSinks: next.profileSinks } : {};
  };
  // From here the running handlers take the signals; one that came during the start is acted on at once.
  held.release();
  await untilStopped(running, log, readiness, reconfigure, held);
  await notifier?.close();
  await closeReauth?.().catch(() => undefined);
  await reauthStores?.close().catch(() => undefined);
  // Everything was closed; should a stray handle keep the event loop alive, do not hang the container's stop.
  setTimeout(() => process.exit(process.exitCode ?? ExitCode.ok), 2_000).unref();
}

/**
 * `--once`: one sweep (renew what is due, reconcile, publish), then a clean close that leaves published tokens
 * in place for the consumers. Exit 0 only when every profile holds a fresh token and its reconcile did not
 * fail; otherwise one line per failed profile on stderr, and 4 when one needs re-authorization, else 1.
 */
async function onePass(context: CommandContext, running: RunningDaemon, log: Logger, releaseSinks: () => Promise<void> | undefined): Promise<void> {
  const stop = (signal: NodeJS.Signals): void => {
    log.warn({ event: 'daemon.stopping', op: 'stop', signal }, 'stopping the one pass');
    void running
      .close()
      .then(() => releaseSinks())
      .catch(() => undefined)
      .finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  const report = await running.sweep();
  // Templates render beside the renewals; the pass is judged once they have ended.
  await running.rendersSettled();
  const status = running.status();
  await running.close();
  process.off('SIGTERM', stop);
  process.off('SIGINT', stop);
  const entries = new Map(report.profiles.map((entry) => [entry.profile, entry]));
  const failed: { name: string; why: string; reauthorize: boolean }[] = [];
  for (const profile of status.profiles) {
    const entry = entries.get(profile.name);
    const reauthorize = profile.terminal?.reason === 'reauthorization_needed';
    if (!profile.ready) failed.push({ name: profile.name, why: profile.reason ?? 'not fresh', reauthorize });
    else if (entry?.reconcile === 'failed') failed.push({ name: profile.name, why: 'the token is fresh, but updating the connector with it failed (see the log)', reauthorize });
    else if (entry?.reconcile === 'deferred' && status.coordinator?.available === false) {
      failed.push({ name: profile.name, why: 'the token is fresh, but the connector was not updated: Redis (--redis-url) is unreachable', reauthorize });
    }
  }
  const { stderr } = context.io;
  for (const { name, why } of failed) stderr.write(`syncauth daemon --once: profile "${name}": ${why}\n`);
  const fresh = status.profiles.length - failed.length;
  log.info({ event: 'daemon.once', op: 'stop', fresh, failed: failed.map((f) => f.name) }, `one pass done: ${fresh} of ${status.profiles.length} profiles fresh`);
  if (failed.length === 0) return;
  const reauthorize = failed.filter((f) => f.reauthorize).map((f) => f.name);
  throw new SyncauthError('SYNCAUTH_NOT_FRESH', `${failed.length} of ${status.profiles.length} profiles are not fresh: ${failed.map((f) => f.name).join(', ')}`, {
    exitCode: reauthorize.length > 0 ? ExitCode.authRequired : ExitCode.error,
    ...(reauthorize.length > 0 ? { hint: `run ${reauthorize.map((name) => `\`${reauthorizeCommand(name)}\``).join(', ')} to authorize again` } : {}),
  });
}

/**
 * Under systemd (Type=notify, NOTIFY_SOCKET set): READY=1 once every profile is first ready, which means its
 * token is already in its files. Returns what stops the watch.
 */
function reportReadiness(running: RunningDaemon, log: Logger): () => void {
  if (!process.env.NOTIFY_SOCKET) return () => undefined;
  const timer = setInterval(() => {
    if (!running.status().ready) return;
    clearInterval(timer);
    void notifySystemd('READY=1').then((sent) => {
      if (sent) log.info({ event: 'daemon.ready', op: 'start' }, 'told systemd the daemon is ready');
      else log.warn({ event: 'daemon.notify_failed', op: 'start' }, 'could not tell systemd the daemon is ready (systemd-notify failed)');
    });
  }, 100);
  timer.unref();
  return () => clearInterval(timer);
}

function untilStopped(
  running: RunningDaemon,
  log: Logger,
  stopReadiness: () => void,
  reconfigure: () => Promise<{ profileSinks?: Map<string, ProfileSinks> } | false>,
  held: Pick<HeldSignals, 'stop' | 'reload'>,
): Promise<void> {
  return new Promise<void>((resolve) => {
    let stopping = false;
    const reload = (): void => {
      log.info({ event: 'daemon.reloading', op: 'load', signal: 'SIGHUP' }, 'SIGHUP: reloading the profiles');
      void reconfigure().then((accepted) => (accepted ? running.reload(accepted) : undefined));
    };
    const stop = (signal: NodeJS.Signals): void => {
      if (stopping) {
        log.warn({ event: 'daemon.stopping', op: 'stop', signal, wait: false }, 'second signal: exiting without waiting');
        process.exit(ExitCode.error);
      }
      stopping = true;
      log.info({ event: 'daemon.stopping', op: 'stop', signal }, 'stopping: letting in-flight work finish');
      stopReadiness();
      void notifySystemd('STOPPING=1')
        .then(() => running.close())
        .catch((error: unknown) => log.error({ event: 'daemon.stop_failed', op: 'stop', err: error }, 'shutdown was not clean'))
        .finally(() => {
          process.off('SIGTERM', stop);
          process.off('SIGINT', stop);
          process.off('SIGHUP', reload);
          log.info({ event: 'daemon.stopped', op: 'stop' }, 'stopped');
          resolve();
        });
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    process.on('SIGHUP', reload);
    if (held.stop) stop(held.stop);
    else if (held.reload) reload();
  });
}
