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
  tokenFileFor,
  type DaemonProfile,
  type ProfileEntry,
  type RunningDaemon,
} from '../../daemon/index.js';
import { absorbing, ExitCode, SyncauthError, ValidationError, type FieldIssue } from '../../errors.js';
import { createLogger, type LogLevel, type Logger } from '../../log.js';
import { SECRET_FILE_NAME, secretFilesOf } from '../../credentials/file.js';
import { startSidecar } from '../../daemon/sidecar.js';
import { exitSoon, holdSignals, reportReadiness, stopDuringStart, untilStopped, type HeldSignals } from '../../daemon/signals.js';
import { onePass } from '../../daemon/once.js';
import type { FileAccess } from '../../publish/file.js';
import { SocketSink, TemplateSink, TokenFileSink, type Sink } from '../../publish/sink.js';
import { checkTokenFilePlaces, tokenFileAccessOf, type ProfileSinks } from '../../publish/token-file.js';
import { checkTemplate, parseTemplateFlag, type TemplateSpec } from '../../publish/template.js';
import { placeSinks, PLACE_RULE } from '../../publish/place.js';
import { removeTemporaryLeftovers } from '../../profile/files.js';
import { openProfileStore, type ProfileStore } from '../../profile/index.js';
import { environmentGrant, handOver, loadDaemonProfiles } from '../../daemon/profiles.js';
import type { CommandContext } from '../context.js';
import { openSession, readSecrets } from '../session.js';
import { configFileLabel, notifyUrlFileLabel, prepareProfileSinks, withDaemonConfigFile, type DaemonCommandOptions } from '../daemon-config.js';
import { checkDaemonOptions } from '../../daemon/spec.js';
import { checkPortsFree, lockDaemonSinks, refuseHeldSinks } from '../daemon-sinks.js';
import { checkSocketPath, socketSpecOf } from '../../publish/socket.js';
import { notifySettingsOf, outboxKeyIssue, startNotifier } from './notify.js';
import { grantHook, grantKeyOf, openReauthStores, reauthLinkFor, reauthSettingIssues, startReauthPage, type ReauthStores } from '../reauth.js';

/** A temporary file this old is no write in progress (those take milliseconds): its writer died. */
const LEFTOVER_AGE_MS = 10_000;

/** How the token is handed to consumers besides the token file's path: checked before anything starts. */
interface Handover {
  tokenFileAccess?: FileAccess;
  templates: TemplateSpec[];
  socket?: { path: string; mode?: number; gid?: number };
}

/** Each sink kind checks its own settings (see src/publish/); every bad one is named at once. */
async function checkHandover(context: CommandContext, options: DaemonCommandOptions, names: string[]): Promise<Handover> {
  const v = context.settings.values;
  const issues: FieldIssue[] = [];
  const tokenFileAccess = await absorbing(issues, () =>
    tokenFileAccessOf({ path: v.tokenFile, mode: v.tokenFileMode, group: v.tokenFileGroup, fields: { path: '--token-file or SYNCAUTH_TOKEN_FILE', mode: label(context, 'tokenFileMode'), group: label(context, 'tokenFileGroup') } }),
  );
  const templates: TemplateSpec[] = [];
  for (const raw of options.template ?? []) {
    const spec = await absorbing(issues, () => parseTemplateFlag(raw, '--template'));
    if (!spec) continue;
    await absorbing(issues, () => checkTemplate(spec, names, '--template'));
    templates.push(spec);
  }
  const socket = await absorbing(issues, () => socketSpecOf({ path: v.socket, mode: options.socketMode, group: options.socketGroup, pathField: '--socket or SYNCAUTH_SOCKET' }));
  if (issues.length > 0) throw new ValidationError(issues);
  return { ...(tokenFileAccess ? { tokenFileAccess } : {}), templates, ...(socket ? { socket } : {}) };
}

/**
 * Every sink whose directory other users may write moves into the daemon's own subdirectory there (see
 * src/publish/place.ts); one that cannot (that subdirectory is someone else's, or a link) is refused with exit 2.
 * Returns the token file's path as it will be written, and updates the handover's paths.
 */
async function placeHandover(context: CommandContext, log: Logger, tokenFile: string | undefined, handover: Handover, names: string[], once: boolean): Promise<string | undefined> {
  // One pass serves no socket, so makes no place for it.
  const socket = once ? undefined : handover.socket;
  const sinks: Sink[] = [
    ...(tokenFile ? [new TokenFileSink(tokenFile, label(context, 'tokenFile'), handover.tokenFileAccess)] : []),
    ...handover.templates.map((spec) => new TemplateSink(spec, '--template', log)),
    ...(socket ? [new SocketSink(socket.path, label(context, 'socket'), socket)] : []),
  ];
  const placed = await placeSinks(sinks.map((sink) => sink.placement()), (template) => [...new Set(names.map((name) => tokenFileFor(template, name)))]);
  const at = sinks.map((sink, i) => {
    const { path: where, movedBecause } = placed[i] as { path: string; movedBecause?: string };
    if (movedBecause !== undefined) {
      log.info(
        { event: 'sink.moved', op: 'start', field: sink.field, configured: sink.path, path: where, reason: movedBecause },
        `${sink.field}: ${movedBecause}, so ${sink.path} is published as ${where} (${PLACE_RULE})`,
      );
    }
    return sink.placedAt(where);
  });
  handover.templates = at.flatMap((sink) => (sink instanceof TemplateSink ? [sink.spec] : []));
  if (socket) socket.path = (at.find((sink) => sink.kind === 'socket') as Sink).path;
  return at.find((sink) => sink.kind === 'token file')?.path;
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

/** The daemon's options and settings checked by their entries in src/daemon/spec.ts, named as they were given. */
function checkSettings(context: CommandContext, options: DaemonCommandOptions): DaemonSettings {
  const v = context.settings.values;
  const issues: FieldIssue[] = [];
  const at = (name: SettingName) => label(context, name);
  const checked = checkDaemonOptions(v, options, at, issues, (name) => name !== 'profile');
  issues.push(...reauthSettingIssues(context, at, (options.notifyUrl?.length ?? 0) > 0 || Boolean(v.notifyUrl)));
  checkDaemonOptions(v, options, at, issues, (name) => name === 'profile');
  if (issues.length > 0) throw new ValidationError(issues);
  const requested = options.profile && options.profile.length > 0 ? [...new Set(options.profile)] : undefined;
  return {
    marginMs: v.renewMargin * 1000,
    sweep: v.sweep,
    concurrency: checked.concurrency as number,
    maxRenewalsPerSecond: checked.maxRenewalsPerSecond as number | undefined,
    checkIntervalMs: checked.checkInterval as number | undefined,
    maxChecksPerSecond: checked.maxChecksPerSecond as number | undefined,
    shutdownTimeoutMs: (checked.shutdownTimeout as number) * 1000,
    requested,
  };
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
  log.debug({ event: 'daemon.starting', op: 'start' }, 'loading the profiles');
  const initial: ProfileEntry[] = await load();
  if (await stopDuringStart(held, log, once)) return;
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
  // The token checks' records in Redis are authenticated under the grant key; without it each replica checks for itself.
  const grantKey = grantKeyOf(context);

  // The parts, started in order as one group (see src/daemon/sidecar.ts): a part that fails to start, or a stop
  // during the start, closes those started before it.
  const sidecar = await startSidecar({
    log,
    once,
    signals: held,
    // Every sink is this run's alone before anything is published, adopted or rendered: one another running
    // process holds refuses the start (exit 2), naming it (see src/publish/sink-lock.ts).
    sinks: () =>
      lockDaemonSinks({
        names,
        sharedTokenFile: (name) => (ownTokenFile(name) ? undefined : sharedTokenFile(name)),
        tokenFileField: label(context, 'tokenFile'),
        templates: handover.templates,
        profileSinks,
        ...(handover.socket && !once ? { socket: { path: handover.socket.path, field: label(context, 'socket') } } : {}),
      }),
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
    daemon: ({ sinks, coordinator, notifier }) =>
      relabeled(context, () =>
        startDaemon({
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
          sinkLocks: sinks,
          ...(coordinator ? { coordinator } : {}),
          ...(notifier ? { notices: notifier } : {}),
          ...(grantKey ? { grantKey } : {}),
          ...(v.onReauthorized && !once ? { onReauthorized: grantHook(context, v.onReauthorized, log) } : {}),
          connectorFailingAfterMs: v.notifyConnectorFailingAfter * 1000,
          shutdownTimeoutMs: settings.shutdownTimeoutMs,
          logger: log,
        }),
      ),
  });
  if (!sidecar) return;
  const { daemon: running, notifier } = sidecar;
  try {
    if (once) {
      held.release();
      try {
        await onePass(running, log, context.io.stderr, () => sidecar.sinks.release());
      } finally {
        // What the pass noticed is tried once now; what is not delivered waits in the outbox for the next run.
        await notifier?.tick();
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
  } finally {
    await sidecar.close();
  }
  // Everything was closed; should a stray handle keep the event loop alive, do not hang the container's stop.
  exitSoon();
}

/** Runs `start`; a ValidationError it throws names the flags and variables the user set (see `relabel`). */
async function relabeled<T>(context: CommandContext, start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (error) {
    throw relabel(context, error);
  }
}
