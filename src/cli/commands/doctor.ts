// `syncauth doctor`: everything syncauth depends on, checked in the order a fix would go (the config directory,
// the secret store, each profile, the service and its API key, the token file, a running daemon), each line ok,
// warn or fail with what to do. It changes nothing: no renewal, no write, only reads and one authenticated GET
// per service. No secret is printed, not even in part.
import { access, constants, lstat, stat } from 'node:fs/promises';
import { get as httpGet } from 'node:http';
import path from 'node:path';
import { resolveSettings, SETTINGS, type StoreKind } from '../../config.js';
import { openSecretStore, SECRET_FILE_NAME, type SecretStore } from '../../credentials/index.js';
import { ExitCode, SyncauthError } from '../../errors.js';
import { openProfileStore, type ProfileState } from '../../profile/index.js';
import { configFileOf } from '../../profile/config-file.js';
import { ServiceClient } from '../../service/client.js';
import { isServiceError } from '../../service/errors.js';
import type { CommandContext } from '../context.js';
import { describeSystemError } from '../errno.js';
import { counted, paletteFor, printJson, type Io } from '../output.js';
import { openSession, readSecrets, type ProfileSession, type ResolvedSecrets } from '../session.js';
import { reauthorizeCommand, syncauthCommand } from '../../profile/name.js';
import { insidePrivateSubdir, ownSubdirProblem, ownUid, sharedBecause } from '../../publish/place.js';
import { parseTemplateFlag } from '../../publish/template.js';

export type CheckStatus = 'ok' | 'warn' | 'fail';

export interface Check {
  check: 'config-dir' | 'config-file' | 'store' | 'profile' | 'service' | 'token-file' | 'template' | 'socket' | 'daemon';
  /** What the line is about: a path, a profile name, a URL. */
  subject: string;
  status: CheckStatus;
  message: string;
  /** What to do, for warn and fail. */
  fix?: string;
}

const SERVICE_DEADLINE_MS = 10_000;
const DAEMON_DEADLINE_MS = 5_000;
const SHORT_STORE_KEY = 16;

function describe(error: unknown): { message: string; hint?: string } {
  const known = error instanceof SyncauthError ? error : describeSystemError(error);
  const hint = known?.hintFor(syncauthCommand);
  if (known) return { message: known.message, ...(hint ? { hint } : {}) };
  return { message: error instanceof Error ? error.message : String(error) };
}

function failed(check: Check['check'], subject: string, error: unknown, fallbackFix: string): Check {
  const { message, hint } = describe(error);
  return { check, subject, status: 'fail', message, fix: hint ?? fallbackFix };
}

async function statOf(target: string) {
  return stat(target).catch(() => undefined);
}

// ---- the config directory ----

async function checkConfigDir(context: CommandContext): Promise<Check> {
  const dir = context.settings.values.configDir;
  const subject = dir;
  const fix = `set ${SETTINGS.configDir.env} (--config-dir) to a directory you can write`;
  // Who may write it, judged as every other command judges it (src/config-dir.ts).
  const verdict = context.settings.configDirVerdict;
  if (verdict?.refused) return { check: 'config-dir', subject: verdict.given, status: 'fail', message: verdict.refused.message, fix: verdict.refused.hint ?? fix };
  const moved = verdict?.movedBecause ? `; the state lives there, in a directory of this user's own, because ${verdict.movedBecause}` : '';
  try {
    const info = await stat(dir);
    if (!info.isDirectory()) return { check: 'config-dir', subject, status: 'fail', message: `${dir} is a file, but the config directory must be a directory`, fix: `move that file away, or ${fix}` };
    await access(dir, constants.W_OK | constants.X_OK);
    return { check: 'config-dir', subject, status: 'ok', message: `${dir} is a writable directory${moved}` };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') return failed('config-dir', subject, error, fix);
  }
  // Not there yet: setup creates it, if the nearest existing directory above lets it.
  let above = path.dirname(dir);
  while (!(await statOf(above)) && above !== path.dirname(above)) above = path.dirname(above);
  try {
    const info = await stat(above);
    if (!info.isDirectory()) return { check: 'config-dir', subject, status: 'fail', message: `${above} is a file, so ${dir} cannot be created`, fix: `move that file away, or ${fix}` };
    await access(above, constants.W_OK | constants.X_OK);
    return { check: 'config-dir', subject, status: 'ok', message: `${dir} does not exist yet; setup creates it${moved}` };
  } catch (error) {
    return failed('config-dir', subject, error, fix);
  }
}

// ---- the config file ----

/** The config file's line: what it records, or why it cannot be read; none for a config dir without one. */
function checkConfigFile(context: CommandContext): Check | undefined {
  const file = configFileOf(context.settings.values.configDir);
  if (context.configFileError !== undefined) return failed('config-file', file, context.configFileError, `fix ${file} by hand, or delete it and run \`${syncauthCommand('setup')}\` again`);
  const recorded = context.inputs.configFile?.profiles;
  if (!recorded) return undefined;
  const choices = Object.entries(recorded).map(([name, choice]) => `profile ${name}: ${String(choice.store ?? 'default')} store`);
  return { check: 'config-file', subject: file, status: 'ok', message: `${file} records ${choices.length > 0 ? choices.join(', ') : 'no profile'}` };
}

/** The store a profile's secrets are in: the flag, the environment, the config file's record, the default. */
function storeKindOf(context: CommandContext, name: string): StoreKind {
  try {
    return resolveSettings({ ...context.inputs, flags: { ...context.inputs.flags, profile: name } }).values.store;
  } catch {
    return context.settings.values.store;
  }
}

// ---- the secret store ----

interface StoreResult {
  check: Check;
  /** The store answered: per-profile secret checks are worth making. */
  usable: boolean;
}

async function checkStore(context: CommandContext, store: SecretStore): Promise<StoreResult> {
  const v = context.settings.values;
  const env = context.inputs.env ?? {};
  if (store.kind === 'env') {
    const names = ['SYNCAUTH_APP_KEY', 'SYNCAUTH_APP_SECRET', 'SYNCAUTH_REFRESH_TOKEN', 'SYNCAUTH_API_KEY'];
    const set = names.filter((name) => env[name]);
    return {
      usable: true,
      check: {
        check: 'store', subject: 'environment', status: 'ok',
        message: `secrets come from the environment (read-only): ${set.length > 0 ? `${set.join(', ')} set` : 'none set'}`,
      },
    };
  }
  if (store.kind === 'file') {
    const file = path.join(v.configDir, SECRET_FILE_NAME);
    const key = v.storeKey ?? env[SETTINGS.storeKey.env];
    const exists = (await statOf(file)) !== undefined;
    if (!key) {
      return exists
        ? { usable: false, check: { check: 'store', subject: file, status: 'fail', message: `${SETTINGS.storeKey.env} is not set, so the file cannot be opened`, fix: `set ${SETTINGS.storeKey.env} to the key the file was written with (other commands ask for it at a terminal)` } }
        : { usable: false, check: { check: 'store', subject: file, status: 'warn', message: `the encrypted file store has no key: ${SETTINGS.storeKey.env} is not set`, fix: `set ${SETTINGS.storeKey.env} to a long random value (e.g. \`openssl rand -base64 32\`) before \`${syncauthCommand('setup')}\`` } };
    }
    try {
      const profiles = await store.listProfiles();
      const short = key.trim().length < SHORT_STORE_KEY;
      const what = exists ? `opens with ${SETTINGS.storeKey.env} (${counted(profiles.length, 'profile')})` : `no secrets stored yet; ${SETTINGS.storeKey.env} is set`;
      return {
        usable: true,
        check: short
          ? { check: 'store', subject: file, status: 'warn', message: `${what}, but the key is shorter than ${SHORT_STORE_KEY} characters`, fix: `use a long random key (e.g. \`openssl rand -base64 32\`); a new store refuses a short one` }
          : { check: 'store', subject: file, status: 'ok', message: what },
      };
    } catch (error) {
      return { usable: false, check: failed('store', file, error, `set the ${SETTINGS.storeKey.env} the file was written with`) };
    }
  }
  try {
    const profiles = await store.listProfiles();
    return { usable: true, check: { check: 'store', subject: 'OS keychain', status: 'ok', message: `answers (${counted(profiles.length, 'profile')} indexed)` } };
  } catch (error) {
    const file = path.join(v.configDir, SECRET_FILE_NAME);
    // A config dir setup switched to the file store before it recorded that choice: the secrets are there.
    const check = failed('store', 'OS keychain', error, `on a host without a keychain, set ${SETTINGS.store.env}=file with ${SETTINGS.storeKey.env}, or ${SETTINGS.store.env}=env with the secrets in the environment`);
    if (!(await statOf(file))) return { usable: false, check };
    const fix = `${file} exists: if the secrets are there, run with ${SETTINGS.store.env}=file (running \`${syncauthCommand('setup')}\` again records that choice)`;
    return { usable: false, check: { ...check, fix } };
  }
}

// ---- profiles ----

interface ServiceTarget {
  baseUrl: string;
  apiKeyHeader: string;
  apiKey: string;
  /** Profile name → its recorded connector id, if any. */
  profiles: Map<string, string | undefined>;
}

function relativeTime(iso: string, now: number): string {
  const seconds = Math.round((Date.parse(iso) - now) / 1000);
  const span = Math.abs(seconds);
  const text = span < 90 ? `${span} s` : span < 5400 ? `${Math.round(span / 60)} min` : `${(span / 3600).toFixed(1)} h`;
  return seconds >= 0 ? `expires in ${text}` : `expired ${text} ago (renewed on demand)`;
}

function stateProblems(name: string, state: ProfileState): Check[] {
  const setup = `run \`${reauthorizeCommand(name)}\``;
  const refresh = `run \`${syncauthCommand(`refresh --profile ${name}`)}\``;
  const checks: Check[] = [];
  if (state.needsReauthorization) {
    checks.push({ check: 'profile', subject: name, status: 'fail', message: 'needs re-authorization: Dropbox no longer accepts its grant', fix: `${setup} to authorize again` });
  } else if (state.lastError?.code === 'SYNCAUTH_SETUP_UNFINISHED') {
    checks.push({ check: 'profile', subject: name, status: 'fail', message: 'is incomplete: setup stopped before the source connector was made', fix: `${refresh} to finish it` });
  } else if (state.lastError) {
    checks.push({
      check: 'profile', subject: name, status: 'fail',
      message: `its last renewal or connector update failed (${state.lastError.at}): ${state.lastError.code}: ${state.lastError.message}`,
      fix: state.lastError.terminal ? `${setup} to correct the setting` : `${refresh} to try again`,
    });
  }
  return checks;
}

async function checkProfile(
  context: CommandContext,
  name: string,
  state: ProfileState | undefined,
  storeUsable: boolean,
  targets: Map<string, ServiceTarget>,
): Promise<Check[]> {
  let session: ProfileSession;
  try {
    session = await openSession(context, name, { askStoreKey: false });
  } catch (error) {
    return [failed('profile', name, error, `run \`${reauthorizeCommand(name)}\``)];
  }
  const checks = state ? stateProblems(name, state) : [];
  const facts: string[] = [state ? 'state readable' : 'made of SYNCAUTH_* variables'];
  let secrets: ResolvedSecrets | undefined;
  // A profile made of variables needs the store only for what the environment lacks.
  if (storeUsable || session.secrets.kind === 'env' || !state) {
    try {
      secrets = await readSecrets(session, { readStore: state !== undefined });
    } catch (error) {
      checks.push(failed('profile', name, error, `run \`${reauthorizeCommand(name)}\``));
    }
  } else {
    facts.push('secrets not checked (the store cannot be opened)');
  }
  if (secrets) {
    const grant = [
      !secrets.appKey && SETTINGS.appKey.env, !secrets.appSecret && SETTINGS.appSecret.env, !secrets.refreshToken && SETTINGS.refreshToken.env,
    ].filter((n): n is string => typeof n === 'string');
    if (grant.length > 0) {
      checks.push({
        check: 'profile', subject: name, status: 'fail', message: `has no Dropbox grant: ${grant.join(', ')} ${grant.length > 1 ? 'are' : 'is'} in neither the store nor the environment`,
        fix: `run \`${reauthorizeCommand(name)}\`, or set ${grant.join(', ')}`,
      });
    } else {
      facts.push('Dropbox grant present');
    }
    if (!secrets.apiKey) {
      checks.push({
        check: 'profile', subject: name, status: 'warn', message: 'has no service API key, so its connector cannot be kept up to date',
        fix: `set ${SETTINGS.apiKey.env}, or run \`${reauthorizeCommand(name)}\``,
      });
    }
  }
  const v = session.values;
  if (state?.accessTokenExpiresAt) facts.push(`access token ${relativeTime(state.accessTokenExpiresAt, Date.now())}`);
  if (v.baseUrl && secrets?.apiKey) {
    const id = `${v.baseUrl}\n${v.apiKeyHeader}\n${secrets.apiKey}`;
    const target = targets.get(id) ?? { baseUrl: v.baseUrl, apiKeyHeader: v.apiKeyHeader, apiKey: secrets.apiKey, profiles: new Map() };
    target.profiles.set(name, state?.connectorId);
    targets.set(id, target);
  }
  if (!checks.some((c) => c.status === 'fail')) checks.unshift({ check: 'profile', subject: name, status: 'ok', message: facts.join(', ') });
  return checks;
}

// ---- the service ----

async function checkService(target: ServiceTarget): Promise<Check[]> {
  const names = [...target.profiles.keys()];
  const of = names.length > 0 ? ` (${names.length === 1 ? 'profile' : 'profiles'} ${names.join(', ')})` : '';
  const subject = target.baseUrl;
  const client = new ServiceClient({
    baseUrl: target.baseUrl, apiKey: target.apiKey, apiKeyHeader: target.apiKeyHeader,
    retry: { retries: 0 }, timeouts: { totalMs: SERVICE_DEADLINE_MS },
  });
  try {
    const sources = await client.listSources({ sourceType: 'dropbox' });
    const checks: Check[] = [{ check: 'service', subject, status: 'ok', message: `reachable, API key accepted${of}` }];
    const ids = new Set(sources.map((s) => s.id));
    for (const [profile, connectorId] of target.profiles) {
      if (connectorId && !ids.has(connectorId)) {
        checks.push({
          check: 'service', subject, status: 'fail', message: `the source connector ${connectorId} of profile ${profile} is not on the service`,
          fix: `run \`${syncauthCommand(`refresh --profile ${profile}`)}\` to create it again`,
        });
      }
    }
    return checks;
  } catch (error) {
    if (isServiceError(error) && (error.code === 'SERVICE_UNAUTHORIZED' || error.code === 'SERVICE_FORBIDDEN')) {
      return [{
        check: 'service', subject, status: 'fail', message: `the service rejected the API key${of} (${error.status ?? 'no status'})`,
        fix: `set ${SETTINGS.apiKey.env} to a key of the right workspace (API Keys in the service's web interface), then run \`${syncauthCommand(`setup${names.length === 1 ? ` --profile ${names[0]}` : ''}`)}\` to store it`,
      }];
    }
    if (isServiceError(error) && error.code === 'SERVICE_NETWORK') {
      return [{ check: 'service', subject, status: 'fail', message: `cannot reach the service${of}: ${error.message}`, fix: 'check the base URL, the network and any proxy (HTTPS_PROXY, NO_PROXY)' }];
    }
    return [failed('service', subject, error, 'check the base URL and try again')];
  } finally {
    await client.close();
  }
}

// ---- where the sinks live ----

/**
 * A sink (token file, template DEST, socket) in a directory other users may write, or something there the
 * daemon will not use: the daemon publishes it in its own subdirectory instead (warn), refuses to start when
 * that subdirectory is not its own (fail), and never adopts or writes through a file it did not make (fail).
 */
async function checkPlace(check: 'token-file' | 'template' | 'socket', file: string): Promise<Check | undefined> {
  const shared = await sharedBecause(path.dirname(file));
  const target = shared ? insidePrivateSubdir(file) : file;
  const own = path.dirname(target);
  const choose = 'or choose a directory only this user may write (e.g. /run/syncauth, 0750)';
  if (shared && (await lstat(own).then(() => true, () => false))) {
    const problem = await ownSubdirProblem(own);
    if (problem) return { check, subject: file, status: 'fail', message: `${shared}, and ${problem}: the daemon refuses to start`, fix: `remove ${own}, ${choose}` };
  }
  const info = await lstat(target).catch(() => undefined);
  const foreign = !info
    ? undefined
    : info.isSymbolicLink()
      ? 'is a symbolic link'
      : info.uid !== ownUid()
        ? `belongs to uid ${info.uid}, not to this user (uid ${ownUid()})`
        : check !== 'socket' && !info.isFile()
          ? 'is not a regular file'
          : undefined;
  if (foreign) {
    const what = check === 'token-file' ? 'adopts it' : check === 'socket' ? 'listens there' : 'writes through it';
    return { check, subject: file, status: 'fail', message: `${target} ${foreign}: the daemon never ${what}`, fix: `remove ${target}${shared ? '' : `, ${choose}`}` };
  }
  if (shared) {
    return { check, subject: file, status: 'warn', message: `${shared}: other users could plant files there, so the daemon publishes it as ${target}`, fix: `point its consumers at ${target}, ${choose}` };
  }
  return undefined;
}

async function checkSocket(file: string): Promise<Check> {
  const dir = path.dirname(file);
  if (!(await statOf(dir))?.isDirectory()) return { check: 'socket', subject: file, status: 'fail', message: `the directory ${dir} does not exist`, fix: `create it, or set ${SETTINGS.socket.env} (--socket) to a path in an existing directory` };
  return (await checkPlace('socket', file)) ?? { check: 'socket', subject: file, status: 'ok', message: `${dir} is a directory only this user may write` };
}

async function checkTemplates(raws: readonly string[], profiles: string[]): Promise<Check[]> {
  const checks: Check[] = [];
  for (const raw of raws) {
    let dest: string;
    try {
      dest = parseTemplateFlag(raw, '--template').dest;
    } catch (error) {
      checks.push(failed('template', raw, error, 'give --template SRC:DEST[:MODE]'));
      continue;
    }
    const files = dest.includes('{profile}') ? profiles.map((p) => dest.split('{profile}').join(p)) : [dest];
    for (const file of files) {
      const dir = path.dirname(file);
      if (!(await statOf(dir))?.isDirectory()) {
        checks.push({ check: 'template', subject: file, status: 'fail', message: `the directory ${dir} does not exist`, fix: 'create it, or render DEST somewhere else' });
        continue;
      }
      checks.push((await checkPlace('template', file)) ?? { check: 'template', subject: file, status: 'ok', message: `${dir} is a directory only this user may write` });
    }
  }
  return checks;
}

// ---- the token file ----

async function checkTokenFile(template: string, profiles: string[]): Promise<Check[]> {
  const files = template.includes('{profile}') ? profiles.map((p) => template.split('{profile}').join(p)) : [template];
  const checks: Check[] = [];
  const fix = `set ${SETTINGS.tokenFile.env} (--token-file) to a file path in an existing directory`;
  for (const file of files) {
    const info = await statOf(file);
    if (info?.isDirectory()) {
      checks.push({ check: 'token-file', subject: file, status: 'fail', message: `${file} is a directory, but the token file must be a file`, fix: `give a file inside it, e.g. ${path.join(file, 'token')}` });
      continue;
    }
    const dir = path.dirname(file);
    const dirInfo = await statOf(dir);
    if (!dirInfo?.isDirectory()) {
      checks.push({ check: 'token-file', subject: file, status: 'fail', message: `the directory ${dir} does not exist`, fix: `create it, or ${fix}` });
      continue;
    }
    try {
      await access(dir, constants.W_OK | constants.X_OK);
      const place = await checkPlace('token-file', file);
      checks.push(place ?? { check: 'token-file', subject: file, status: 'ok', message: info ? `${file} exists and its directory is writable` : `${dir} is writable` });
    } catch (error) {
      checks.push(failed('token-file', file, error, fix));
    }
  }
  return checks;
}

// ---- a running daemon ----

/** One GET with a deadline. node:http rather than fetch, which refuses some ports a daemon may use (6000, 6667). */
function get(url: string, deadlineMs: number): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const request = httpGet(url, { timeout: deadlineMs }, (response) => {
      let text = '';
      response.setEncoding('utf8').on('data', (chunk: string) => { text += chunk; });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, text }));
      response.on('error', reject);
    });
    request.on('timeout', () => request.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })));
    request.on('error', reject);
  });
}

/**
 * A running daemon's line, and one warning for each profile whose token checks are off (the app may not ask
 * Dropbox whose token it is: a revoked grant is then noticed only at the next renewal).
 */
async function checkDaemonAndChecks(listen: { host: string; port: number }): Promise<Check[]> {
  const checksOff: Check[] = [];
  const line = await checkDaemon(listen, (url, profiles) => {
    for (const [name, p] of profiles) {
      if (typeof p.checksOff === 'string') checksOff.push({ check: 'daemon', subject: url, status: 'warn', message: `profile ${name}: token checks are off: ${p.checksOff}`, fix: `a revoked grant of ${name} is noticed only at its next renewal until then` });
    }
  });
  return [line, ...checksOff];
}

async function checkDaemon(listen: { host: string; port: number }, onProfiles: (url: string, profiles: [string, { checksOff?: unknown }][]) => void = () => {}): Promise<Check> {
  // An address that means "every interface" is asked on loopback.
  const host = listen.host === '0.0.0.0' ? '127.0.0.1' : listen.host === '::' ? '::1' : listen.host;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${listen.port}/readyz`;
  const start = `start it with \`syncauth daemon --listen ${listen.host.includes(':') ? `[${listen.host}]` : listen.host}:${listen.port}\`, or give the address it listens on`;
  let response: { status: number; text: string };
  try {
    response = await get(url, DAEMON_DEADLINE_MS);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'ECONNREFUSED' ? 'nothing listens there' : code === 'ETIMEDOUT' ? `no answer within ${DAEMON_DEADLINE_MS / 1000} s` : (error as Error).message;
    return { check: 'daemon', subject: url, status: 'fail', message: `no daemon answers: ${why}`, fix: start };
  }
  const { text } = response;
  let body: { ready?: boolean; coordinator?: string; checks?: { noticeWithinSeconds?: number }; profiles?: Record<string, { ready?: boolean; reason?: string; checksOff?: unknown }> } | undefined;
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    body = undefined;
  }
  if (!body || typeof body.ready !== 'boolean') {
    return { check: 'daemon', subject: url, status: 'fail', message: `answered ${response.status}, but not as a syncauth daemon`, fix: 'check the address: another program may listen there' };
  }
  const profiles = Object.entries(body.profiles ?? {});
  onProfiles(url, profiles);
  const within = body.checks?.noticeWithinSeconds;
  const notice = typeof within === 'number' ? `; a revoked grant is noticed within ${within >= 120 ? `${Math.ceil(within / 60)} min` : `${within} s`}` : '';
  if (body.ready) return { check: 'daemon', subject: url, status: 'ok', message: `ready (${counted(profiles.length, 'profile')}${notice})` };
  const waiting = profiles.filter(([, p]) => !p.ready).map(([name, p]) => `${name}${p.reason ? `: ${p.reason}` : ''}`);
  return {
    check: 'daemon', subject: url, status: 'fail',
    message: `not ready${waiting.length > 0 ? ` (${waiting.join('; ')})` : ''}${body.coordinator === 'unreachable' ? '; its Redis coordinator is unreachable' : ''}`,
    fix: `see the daemon's log for the failing profile, and \`${syncauthCommand('doctor --profile NAME')}\` for it`,
  };
}

// ---- the command ----

// The store, the service and the daemon are named in a column of their own; the other messages name their path.
const SUBJECT_SHOWN: ReadonlySet<Check['check']> = new Set(['store', 'service', 'daemon']);

function printChecks(io: Io, checks: Check[]): void {
  const paint = paletteFor(io.stdout);
  const width = Math.max(...checks.map((c) => label(c).length));
  for (const c of checks) {
    const status = c.status === 'ok' ? paint.good('ok  ') : c.status === 'warn' ? paint.warn('warn') : paint.bad('fail');
    const subject = SUBJECT_SHOWN.has(c.check) ? `${c.subject}  ` : '';
    io.stdout.write(`${status}  ${label(c).padEnd(width)}  ${subject}${c.message}\n`);
    if (c.fix && c.status !== 'ok') io.stdout.write(`${' '.repeat(width + 8)}→ ${c.fix}\n`);
  }
}

function label(check: Check): string {
  switch (check.check) {
    case 'config-dir':
      return 'config directory';
    case 'config-file':
      return 'config file';
    case 'store':
      return 'secret store';
    case 'profile':
      return check.subject ? `profile ${check.subject}` : 'profiles';
    case 'token-file':
      return 'token file';
    case 'template':
      return 'template';
    case 'socket':
      return 'socket';
    default:
      return check.check;
  }
}

export interface DoctorOptions {
  /** Repeated --template SRC:DEST[:MODE], as the daemon is given them: where each DEST lands is checked. */
  template?: string[];
}

export async function doctor(context: CommandContext, options: DoctorOptions = {}): Promise<void> {
  const v = context.settings.values;
  const env = context.inputs.env ?? {};
  const checks: Check[] = [await checkConfigDir(context)];
  // A config dir the rule refuses is not read at all: nothing in it is to be trusted.
  if (context.settings.configDirVerdict?.refused) {
    report(context, checks);
    return;
  }
  const configFile = checkConfigFile(context);
  if (configFile) checks.push(configFile);

  // The profiles: the one asked for, or every stored one plus one made of SYNCAUTH_* variables.
  const profiles = openProfileStore(v.configDir);
  const only = context.settings.sources.profile === 'default' ? undefined : v.profile;
  let names: string[] = [];
  let listing: Check | undefined;
  try {
    names = only ? [only] : await profiles.names();
  } catch (error) {
    // Said once: a config directory that failed its own check fails the listing for the same reason.
    if ((checks[0] as Check).status !== 'fail') listing = failed('profile', '', error, `set ${SETTINGS.configDir.env} to the directory setup used`);
  }
  const environmentGrant = Boolean(env[SETTINGS.refreshToken.env]);
  if (!only && environmentGrant && !names.includes(v.profile)) names.push(v.profile);

  // Each store the profiles use (the one the config file records for each, unless a flag or the environment
  // says otherwise), checked once.
  const kindOf = new Map(names.map((name) => [name, storeKindOf(context, name)]));
  const kinds = new Map<StoreKind, boolean>();
  for (const kind of new Set(names.length > 0 ? kindOf.values() : [v.store])) {
    try {
      // Its own check reports a short key; the store's warning would say it twice.
      const store: SecretStore = openSecretStore({ kind, configDir: v.configDir, env, ...(v.storeKey ? { storeKey: v.storeKey } : {}), onWarning: () => undefined });
      const result = await checkStore(context, store);
      checks.push(result.check);
      kinds.set(kind, result.usable);
    } catch (error) {
      checks.push(failed('store', kind, error, `set ${SETTINGS.store.env} to keychain, file or env`));
      kinds.set(kind, false);
    }
  }
  if (listing) checks.push(listing);
  const targets = new Map<string, ServiceTarget>();
  for (const name of names) {
    let state: ProfileState | undefined;
    try {
      state = await profiles.read(name);
    } catch (error) {
      checks.push(failed('profile', name, error, `run \`${reauthorizeCommand(name)}\``));
      continue;
    }
    if (!state && !environmentGrant) {
      checks.push({ check: 'profile', subject: name, status: 'fail', message: 'has not been set up', fix: `run \`${reauthorizeCommand(name)}\`` });
      continue;
    }
    checks.push(...(await checkProfile(context, name, state, kinds.get(kindOf.get(name) ?? v.store) === true, targets)));
  }
  if (names.length === 0 && (checks[0] as Check).status !== 'fail' && !checks.some((c) => c.check === 'profile')) {
    checks.push({ check: 'profile', subject: '', status: 'warn', message: 'no profile is set up yet', fix: `run \`${syncauthCommand('setup')}\`` });
  }
  // Without a profile, the service the environment names.
  if (targets.size === 0 && v.baseUrl && v.apiKey) {
    targets.set('env', { baseUrl: v.baseUrl, apiKeyHeader: v.apiKeyHeader, apiKey: v.apiKey, profiles: new Map() });
  }
  for (const target of targets.values()) checks.push(...(await checkService(target)));

  if (v.tokenFile) checks.push(...(await checkTokenFile(v.tokenFile, names.length > 0 ? names : [v.profile])));
  if (options.template && options.template.length > 0) checks.push(...(await checkTemplates(options.template, names.length > 0 ? names : [v.profile])));
  if (v.socket) checks.push(await checkSocket(v.socket));
  if (v.listen) checks.push(...(await checkDaemonAndChecks(v.listen)));
  report(context, checks);
}

/** Prints the checks; throws (exit 1) when one failed. */
function report(context: CommandContext, checks: Check[]): void {
  const failures = checks.filter((c) => c.status === 'fail');
  const warnings = checks.filter((c) => c.status === 'warn');
  if (context.json) {
    printJson(context.io, { ok: failures.length === 0, checks });
  } else {
    printChecks(context.io, checks);
    context.io.stdout.write(`\n${failures.length === 0 ? 'no problems found' : counted(failures.length, 'problem')}${warnings.length > 0 ? `, ${counted(warnings.length, 'warning')}` : ''}\n`);
  }
  if (failures.length > 0) {
    throw new SyncauthError('SYNCAUTH_DOCTOR_FAILED', `${counted(failures.length, 'check')} of ${checks.length} failed`, {
      exitCode: ExitCode.error,
      hint: context.json ? 'each failed check in the JSON has a "fix"' : 'each failed line above says what to do (→)',
    });
  }
}
