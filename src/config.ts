// Every setting of SPEC §4, resolved once, in one place: flags > environment > `.env` > the config file's
// choices for the profile > profile state > defaults. Commands receive the resolved values; nothing below cli/ reads the environment itself.
import { closeSync, constants as fsConstants, fstatSync, openSync, readSync } from 'node:fs';
import path from 'node:path';
import { checkConfigDir, type ConfigDirVerdict } from './config-dir.js';
import { ValidationError, type FieldIssue } from './errors.js';
import { HTTP_SCHEMES, parseUrl } from './net/http.js';
import { registerAppCredentials, registerSecrets } from './redact.js';
import { SCHEDULES, type Schedule } from './service/constants.js';

export type SettingSource = 'flag' | 'env' | 'dotenv' | 'config' | 'profile' | 'default';

interface SettingSpec<T> {
  env: string;
  /** Flag name in kebab case; absent for secrets, which are never taken from argv. */
  flag?: string;
  secret?: boolean;
  parse: (raw: string) => T;
  default?: () => T;
  describe: string;
  /**
   * Whether a `.env` may set it. A `.env` comes with whatever directory the command runs in, often someone
   * else's repository, so a setting that says where secrets are kept, where a token is written or served, or
   * who is told about one is `false`: it comes only from a flag or the real environment. Every setting says.
   */
  dotenv: boolean;
}

function nonEmpty(raw: string): string {
  const value = raw.trim();
  if (!value) throw new Error('must not be empty');
  return value;
}

function boolean(raw: string): boolean {
  const value = raw.trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(value)) return true;
  if (['false', '0', 'no', 'off'].includes(value)) return false;
  throw new Error('must be true or false');
}

function integer(min: number, max: number) {
  return (raw: string): number => {
    const value = raw.trim();
    if (!/^\d+$/.test(value)) throw new Error(`must be a whole number from ${min} to ${max}`);
    const n = Number(value);
    if (n < min || n > max) throw new Error(`must be a whole number from ${min} to ${max}`);
    return n;
  };
}

function oneOf<T extends string>(values: readonly T[]) {
  return (raw: string): T => {
    const value = raw.trim() as T;
    if (!values.includes(value)) throw new Error(`must be one of: ${values.join(', ')}`);
    return value;
  };
}

function httpUrl(raw: string): string {
  const value = raw.trim();
  const url = parseUrl(value, HTTP_SCHEMES);
  if (url === 'not_a_url') throw new Error('must be an absolute http(s) URL, like https://platform.example.com');
  if (url === 'wrong_scheme') throw new Error('must be an http(s) URL');
  if (url === 'has_credentials') throw new Error('must not carry credentials in the URL');
  return value.replace(/\/+$/, '');
}

function headerName(raw: string): string {
  const value = raw.trim();
  // RFC 9110 token characters; anything else would be rejected by the HTTP stack at send time.
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(value)) throw new Error('must be a valid HTTP header name');
  return value.toLowerCase();
}

function profileName(raw: string): string {
  const value = raw.trim();
  // The name becomes part of file names and keychain accounts, so keep it to a safe alphabet.
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(value)) {
    throw new Error('must be 1-64 letters, digits, dot, dash or underscore, starting with a letter or digit');
  }
  return value;
}

/**
 * Health and metrics only (never a token), so any explicit address will do: loopback by default in the
 * examples, `0.0.0.0` where a kubelet's probes or Prometheus come from outside the pod. A host name other than
 * localhost is refused: which interface it binds would depend on DNS.
 */
function listenAddress(raw: string): { host: string; port: number } {
  const match = /^(\d{1,3}(?:\.\d{1,3}){3}|localhost|\[[0-9A-Fa-f:.]+\]):(\d{1,5})$/.exec(raw.trim());
  const host = match?.[1] ?? '';
  const port = match ? Number(match[2]) : NaN;
  const octetsOk = !/^\d/.test(host) || host.split('.').every((o) => Number(o) <= 255);
  if (!match || port > 65535 || !octetsOk) {
    throw new Error('must be an IP address and port, like 127.0.0.1:9464 (or 0.0.0.0:9464 for probes and scrapes from outside)');
  }
  return { host: host === 'localhost' ? '127.0.0.1' : host.replace(/^\[|\]$/g, ''), port };
}

function loopbackRedirect(raw: string): string {
  const value = raw.trim();
  const url = parseUrl(value, ['http:'], { credentials: 'allow' });
  if (url === 'not_a_url') throw new Error('must be a URL like http://127.0.0.1:53682/callback');
  if (typeof url === 'string' || !['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname) || !url.port) {
    throw new Error('must be an http loopback URL with an explicit port, like http://127.0.0.1:53682/callback');
  }
  return value;
}

/**
 * The re-authorization page's public URL, the origin links and the Dropbox redirect use: https, or http on
 * loopback only (a link on plain http elsewhere would cross the network readable). No path, query or credentials.
 */
function publicUrl(raw: string): string {
  const value = raw.trim();
  const url = parseUrl(value, HTTP_SCHEMES);
  if (url === 'not_a_url' || url === 'wrong_scheme') throw new Error('must be an absolute https URL, like https://syncauth.example.com');
  if (url === 'has_credentials') throw new Error('must not carry credentials in the URL');
  const loopback = ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
  if (url.protocol === 'http:' && !loopback) throw new Error('must be https (http only on loopback, like http://127.0.0.1:8443)');
  if ((url.pathname !== '/' && url.pathname !== '') || url.search || url.hash) throw new Error('must be an origin alone, without a path, query or fragment, like https://syncauth.example.com');
  return url.origin;
}

/** A duration: a whole number of seconds, or with a unit (`90m`, `72h`, `3d`); from a minute to 30 days. */
function duration(raw: string): number {
  const match = /^(\d+)\s*(s|m|h|d)?$/.exec(raw.trim());
  const unit = { s: 1, m: 60, h: 3_600, d: 86_400 }[(match?.[2] ?? 's') as 's' | 'm' | 'h' | 'd'];
  const seconds = match ? Number(match[1]) * unit : NaN;
  if (!(seconds >= 60 && seconds <= 30 * 86_400)) throw new Error('must be a duration from 1m to 30d, like 72h, 90m or 3d');
  return seconds;
}

export const ACCESS_MODES = ['read', 'write', 'read-write'] as const;
export type AccessMode = (typeof ACCESS_MODES)[number];
export const STORES = ['keychain', 'file', 'env'] as const;
export type StoreKind = (typeof STORES)[number];

export const SETTINGS = {
  profile: { env: 'SYNCAUTH_PROFILE', dotenv: true, flag: 'profile', parse: profileName, default: () => 'default', describe: 'profile name' },
  configDir: {
    env: 'SYNCAUTH_CONFIG_DIR', dotenv: false, flag: 'config-dir', parse: (raw: string) => path.resolve(nonEmpty(raw)),
    describe: 'where profile state lives',
  },
  baseUrl: { env: 'SYNCAUTH_BASE_URL', dotenv: true, flag: 'base-url', parse: httpUrl, describe: "the service's base URL" },
  apiKey: { env: 'SYNCAUTH_API_KEY', dotenv: true, secret: true, parse: nonEmpty, describe: 'the service API key' },
  apiKeyHeader: {
    env: 'SYNCAUTH_API_KEY_HEADER', dotenv: true, flag: 'api-key-header', parse: headerName, default: () => 'service-api-key',
    describe: "the API key's header name",
  },
  // OAuth calls the app key a public identifier, but it is half of the pair that renews tokens and the service
  // keeps it with the other secrets; syncauth treats it as one, so it never lands in argv or shell history.
  appKey: { env: 'SYNCAUTH_APP_KEY', dotenv: true, secret: true, parse: nonEmpty, describe: 'the Dropbox app key' },
  appSecret: { env: 'SYNCAUTH_APP_SECRET', dotenv: true, secret: true, parse: nonEmpty, describe: 'the Dropbox app secret' },
  refreshToken: { env: 'SYNCAUTH_REFRESH_TOKEN', dotenv: true, secret: true, parse: nonEmpty, describe: 'an existing Dropbox grant' },
  remoteUrl: { env: 'SYNCAUTH_REMOTE_URL', dotenv: true, flag: 'remote-url', parse: nonEmpty, describe: 'dropbox://<subfolder>' },
  recursive: { env: 'SYNCAUTH_RECURSIVE', dotenv: true, flag: 'recursive', parse: boolean, default: () => false, describe: 'read subfolders too' },
  access: {
    env: 'SYNCAUTH_ACCESS', dotenv: true, flag: 'access', parse: oneOf(ACCESS_MODES), default: (): AccessMode => 'read',
    describe: 'scopes to expect: read, write or read-write',
  },
  connectorName: { env: 'SYNCAUTH_CONNECTOR_NAME', dotenv: true, flag: 'connector-name', parse: nonEmpty, describe: "the source connector's name" },
  workflowId: { env: 'SYNCAUTH_WORKFLOW_ID', dotenv: true, flag: 'workflow-id', parse: nonEmpty, describe: 'workflow to wire' },
  schedule: {
    env: 'SYNCAUTH_SCHEDULE', dotenv: true, flag: 'schedule', parse: oneOf<Schedule>(SCHEDULES), describe: 'named workflow schedule',
  },
  authorizeUrl: {
    env: 'SYNCAUTH_AUTHORIZE_URL', dotenv: true, flag: 'authorize-url', parse: httpUrl,
    default: () => 'https://www.dropbox.com/oauth2/authorize', describe: 'Dropbox authorize page',
  },
  tokenUrl: {
    env: 'SYNCAUTH_TOKEN_URL', dotenv: true, flag: 'token-url', parse: httpUrl,
    default: () => 'https://api.dropboxapi.com/oauth2/token', describe: 'Dropbox token endpoint',
  },
  dropboxApiUrl: {
    env: 'SYNCAUTH_DROPBOX_API_URL', dotenv: true, flag: 'dropbox-api-url', parse: httpUrl,
    default: () => 'https://api.dropboxapi.com', describe: 'Dropbox v2 API base',
  },
  redirectUri: {
    env: 'SYNCAUTH_REDIRECT_URI', dotenv: true, flag: 'redirect-uri', parse: loopbackRedirect,
    default: () => 'http://127.0.0.1:53682/callback', describe: 'loopback redirect registered in the App Console',
  },
  store: { env: 'SYNCAUTH_STORE', dotenv: false, flag: 'store', parse: oneOf(STORES), default: (): StoreKind => 'keychain', describe: 'secret store' },
  storeKey: { env: 'SYNCAUTH_STORE_KEY', dotenv: false, secret: true, parse: nonEmpty, describe: 'key of the encrypted file store' },
  renewMargin: {
    env: 'SYNCAUTH_RENEW_MARGIN', dotenv: true, flag: 'renew-margin', parse: integer(1, 14_399), default: () => 900,
    describe: 'seconds before expiry to renew',
  },
  sweep: { env: 'SYNCAUTH_SWEEP', dotenv: true, flag: 'sweep', parse: nonEmpty, default: () => '* * * * *', describe: "the daemon's cron expression" },
  tokenFile: { env: 'SYNCAUTH_TOKEN_FILE', dotenv: false, flag: 'token-file', parse: (raw: string) => path.resolve(nonEmpty(raw)), describe: 'publish the access token here' },
  tokenFileMode: { env: 'SYNCAUTH_TOKEN_FILE_MODE', dotenv: false, flag: 'token-file-mode', parse: nonEmpty, describe: 'mode of the token file, e.g. 0640 (default 0600)' },
  tokenFileGroup: { env: 'SYNCAUTH_TOKEN_FILE_GROUP', dotenv: false, flag: 'token-file-group', parse: nonEmpty, describe: "the token file's group (name or id), for a consumer running as another user" },
  socket: { env: 'SYNCAUTH_SOCKET', dotenv: false, flag: 'socket', parse: (raw: string) => path.resolve(nonEmpty(raw)), describe: 'serve the token on request on this Unix socket (0600)' },
  listen: { env: 'SYNCAUTH_LISTEN', dotenv: true, flag: 'listen', parse: listenAddress, describe: 'health/metrics address' },
  reauthListen: {
    env: 'SYNCAUTH_REAUTH_LISTEN', dotenv: false, flag: 'reauth-listen', parse: listenAddress,
    describe: 'serve the re-authorization page here (needs --public-url)',
  },
  publicUrl: { env: 'SYNCAUTH_PUBLIC_URL', dotenv: false, flag: 'public-url', parse: publicUrl, describe: "the re-authorization page's public origin (https)" },
  reauthLinkTtl: {
    env: 'SYNCAUTH_REAUTH_LINK_TTL', dotenv: false, flag: 'reauth-link-ttl', parse: duration, default: () => 72 * 3_600,
    describe: 'how long a re-authorization link lives, e.g. 72h',
  },
  redisUrl: { env: 'SYNCAUTH_REDIS_URL', dotenv: false, flag: 'redis-url', parse: nonEmpty, describe: 'coordinate replicas' },
  // Seals the grant replicas share after a re-authorization: it decides who can read a refresh token kept in
  // Redis and which records are adopted, so, like the store's key, it comes only from the real environment.
  grantKey: { env: 'SYNCAUTH_GRANT_KEY', dotenv: false, secret: true, parse: nonEmpty, describe: 'key sealing the grant replicas share (32 bytes, base64)' },
  // A command run with each new grant on stdin: the daemon's own configuration, never a .env's.
  onReauthorized: {
    env: 'SYNCAUTH_ON_REAUTHORIZED', dotenv: false, flag: 'on-reauthorized', parse: nonEmpty,
    describe: 'run this command (sh -c) with a grant obtained by re-authorization on stdin, to store it where a restart reads it',
  },
  // Who is told when a person is needed: never from a `.env`. The flag (--notify-url, repeatable) is the daemon's own.
  notifyUrl: { env: 'SYNCAUTH_NOTIFY_URL', dotenv: false, parse: nonEmpty, describe: 'send notices to these URLs (comma-separated)' },
  notifySecret: { env: 'SYNCAUTH_NOTIFY_SECRET', dotenv: true, secret: true, parse: nonEmpty, describe: 'signing secret of the notices (whsec_...)' },
  notifyFormat: {
    env: 'SYNCAUTH_NOTIFY_FORMAT', dotenv: true, flag: 'notify-format', parse: oneOf(['standard', 'slack'] as const), default: () => 'standard' as const,
    describe: 'body of the notices: standard (Standard Webhooks JSON) or slack',
  },
  notifyConnectorFailingAfter: {
    env: 'SYNCAUTH_NOTIFY_CONNECTOR_FAILING_AFTER', dotenv: true, flag: 'notify-connector-failing-after', parse: integer(1, 7 * 24 * 3600), default: () => 900,
    describe: 'seconds of failing reconciles before connector.failing is sent',
  },
  config: {
    env: 'SYNCAUTH_DAEMON_CONFIG', dotenv: false, flag: 'config', parse: (raw: string) => path.resolve(nonEmpty(raw)),
    describe: "the daemon's configuration file, YAML or JSON (flags and variables win over it)",
  },
  logLevel: {
    env: 'SYNCAUTH_LOG_LEVEL', dotenv: true, flag: 'log-level', parse: oneOf(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const),
    default: () => 'info' as const, describe: 'log level',
  },
} satisfies Record<string, SettingSpec<unknown>>;

type Specs = typeof SETTINGS;
export type SettingName = keyof Specs;
type ValueOf<K extends SettingName> = ReturnType<Specs[K]['parse']>;
export type Settings = { [K in SettingName]: ValueOf<K> | undefined } & {
  profile: string;
  configDir: string;
  apiKeyHeader: string;
  recursive: boolean;
  access: AccessMode;
  authorizeUrl: string;
  tokenUrl: string;
  dropboxApiUrl: string;
  redirectUri: string;
  store: StoreKind;
  renewMargin: number;
  sweep: string;
  logLevel: string;
  notifyFormat: 'standard' | 'slack';
  notifyConnectorFailingAfter: number;
  reauthLinkTtl: number;
};

export interface ResolvedSettings {
  values: Settings;
  /** Where each value came from, for `status` and for error messages. */
  sources: Partial<Record<SettingName, SettingSource>>;
  /**
   * Settings a `.env` set that were passed over because they would direct secrets that did not come from that
   * `.env` (see DOTENV_DESTINATIONS), with why; only those whose value the `.env` would have changed.
   */
  ignoredDotenv: IgnoredDotenv[];
  /** How the config dir was judged (config-dir.ts); absent when the command never opens it. */
  configDirVerdict?: ConfigDirVerdict;
}

export interface IgnoredDotenv {
  name: SettingName;
  reason: string;
}

export interface SettingInputs {
  /** Parsed flags keyed by setting name (camelCase), as commander gives them. */
  flags?: Partial<Record<SettingName, unknown>>;
  env?: NodeJS.ProcessEnv;
  /** Contents of a `.env` file, already parsed. */
  dotenv?: Record<string, string>;
  /**
   * What setup chose for each profile (`config.json` in the config dir, see profile/config-file.ts): the entry of
   * the profile these settings resolve to is used, below the flags, the environment and `.env`.
   */
  configFile?: { profiles: Readonly<Record<string, Partial<Record<SettingName, unknown>>>> };
  /** Non-secret per-profile state. */
  profile?: Partial<Record<SettingName, unknown>>;
  /** The platform's config directory for syncauth (from env-paths), used when none is set. */
  defaultConfigDir?: string;
  /** What the command knows about where its secrets come from, beyond the environment and the `.env`. */
  dotenvTrust?: DotenvTrust;
  /**
   * How the config dir is judged before anything in it is read or written (config-dir.ts): `enforce` (the
   * default) refuses one others may write, `report` gives the refusal in `configDirVerdict` instead, for a
   * command that diagnoses it (doctor), `skip` is for a command that never opens it.
   */
  configDirCheck?: 'enforce' | 'report' | 'skip';
  /** The verdict an earlier resolution of the same inputs reached, reused while the config dir is the same. */
  configDirVerdict?: ConfigDirVerdict;
}

export const SECRET_SETTINGS = (Object.keys(SETTINGS) as SettingName[]).filter(
  (name) => (SETTINGS[name] as SettingSpec<unknown>).secret,
);

/**
 * The endpoints a profile's secrets are sent to. Setup records them with the secrets, and a different one from
 * the environment, `.env` or a flag is refused for that profile unless the user overrides it explicitly.
 */
export const ENDPOINT_SETTINGS = ['baseUrl', 'authorizeUrl', 'tokenUrl', 'dropboxApiUrl'] as const satisfies readonly SettingName[];

/** Set to 1 in the process environment (never in `.env`) to use an endpoint that differs from the recorded one. */
export const ENDPOINT_OVERRIDE_ENV = 'SYNCAUTH_ENDPOINT_OVERRIDE';

export type SecretSetting = 'apiKey' | 'appKey' | 'appSecret' | 'refreshToken';
const GRANT: readonly SecretSetting[] = ['appKey', 'appSecret', 'refreshToken'];

/**
 * The settings that choose where secrets go, and the secrets each one directs: the service base URL gets the
 * API key and, in the connector, the Dropbox grant; the API key picks the workspace that connector goes to;
 * Dropbox's endpoints get the app key, the app secret and the refresh token (or the access tokens renewed
 * with them). The one rule for a `.env`: a value it sets here is used only when none of those secrets comes
 * from anywhere but that same `.env` (the environment, the profile's store, a prompt); otherwise it is passed
 * over, the next source decides (the profile's state, the default), and the command says so on stderr.
 */
export const DOTENV_DESTINATIONS: Readonly<Record<(typeof ENDPOINT_SETTINGS)[number] | 'apiKey', readonly SecretSetting[]>> = {
  baseUrl: ['apiKey', ...GRANT],
  apiKey: GRANT,
  authorizeUrl: GRANT,
  tokenUrl: GRANT,
  dropboxApiUrl: GRANT,
};

export interface DotenvTrust {
  /** Secrets the command asks for at a prompt (or obtains in the browser) when neither the environment nor the `.env` has them. */
  prompts?: readonly SecretSetting[];
  /** Set when the profile's store holds secrets, saying whose (e.g. `profile "work"'s keychain store`): they replace a `.env`'s. */
  store?: string;
  /** The command records the endpoints it uses with the profile (setup): a `.env` may choose none of them. */
  records?: boolean;
}

const isEndpoint = (name: SettingName): boolean => (ENDPOINT_SETTINGS as readonly SettingName[]).includes(name);

function listed(names: string[]): string {
  return names.length <= 1 ? names.join('') : `${names.slice(0, -1).join(', ')} and ${names[names.length - 1] as string}`;
}

/**
 * Why a `.env`'s value of `name` may not be used, or undefined when it may. `secretFrom` says where each secret
 * the command has comes from ('env' or 'dotenv'), absent when neither has it.
 */
function dotenvDestinationRefusal(
  name: SettingName,
  secretFrom: Partial<Record<SecretSetting, SettingSource>>,
  trust: DotenvTrust,
): string | undefined {
  const directs = (DOTENV_DESTINATIONS as Partial<Record<SettingName, readonly SecretSetting[]>>)[name];
  if (!directs) return undefined;
  if (isEndpoint(name) && trust.records) return 'setup records the endpoints it uses, and takes them only from flags, the environment or the defaults';
  const env = (names: readonly SecretSetting[]) => listed(names.map((secret) => SETTINGS[secret].env));
  const fromEnv = directs.filter((secret) => secretFrom[secret] === 'env');
  if (fromEnv.length > 0) return `${env(fromEnv)} ${fromEnv.length > 1 ? 'come' : 'comes'} from the environment`;
  const prompted = directs.filter((secret) => !secretFrom[secret] && trust.prompts?.includes(secret));
  if (prompted.length > 0) return `${env(prompted)} would be asked for, not read from the .env`;
  if (isEndpoint(name) && trust.store) return `the secrets come from ${trust.store}`;
  return undefined;
}

// A `.env` belongs to whatever directory the command runs in, often a clone of someone else's repository, so
// it may not choose where secrets are kept or where a token goes: the settings marked `dotenv: false` (the
// config directory holding the recorded endpoints the secrets are bound to, the store and its key, the token
// file with its mode and group, the socket, the coordinator) and the endpoint override come only from the real
// environment or flags.
const NOT_FROM_DOTENV: readonly string[] = [
  ...(Object.values(SETTINGS) as SettingSpec<unknown>[]).filter((spec) => !spec.dotenv).map((spec) => spec.env),
  ENDPOINT_OVERRIDE_ENV,
];

export interface ScreenedDotenv {
  /** What resolveSettings may use. */
  dotenv: Record<string, string>;
  /** syncauth variables the file set that a `.env` may not set; they are left out. */
  ignored: string[];
}

/** Drops from a `.env` the variables it may not set (see NOT_FROM_DOTENV). */
export function screenDotenv(dotenv: Record<string, string>): ScreenedDotenv {
  const kept: Record<string, string> = {};
  const ignored: string[] = [];
  for (const [key, value] of Object.entries(dotenv)) {
    if (!NOT_FROM_DOTENV.includes(key)) kept[key] = value;
    else if (value.trim() !== '') ignored.push(key);
  }
  return { dotenv: kept, ignored };
}

/** Reads `.env` from `dir` without touching process.env; absent file gives an empty map. */
export function readDotenv(dir: string): Record<string, string> {
  return readDotenvFile(dir).values;
}

/** A line of a `.env` that was skipped: its number (from 1) and what is wrong, never its text. */
export interface DotenvProblem {
  line: number;
  message: string;
}

export interface DotenvFile {
  file: string;
  values: Record<string, string>;
  problems: DotenvProblem[];
  /** Why the file exists but could not be read (e.g. `permission denied`); its settings are then not used. */
  unreadable?: string;
}

/** A `.env` is a few lines of settings; anything near this size is not one. */
export const MAX_DOTENV_BYTES = 256 * 1024;

/**
 * Reads `.env` from `dir`. An absent file reads as empty, and so does a directory of that name, which is
 * usually a Python virtualenv rather than settings. The file may have come with a cloned repository, so it is
 * opened without blocking (a FIFO or device named `.env` would otherwise hang every command, before it could
 * even handle a signal), checked on the descriptor to be a regular file, and read up to a size bound; anything
 * else is reported as unreadable and its settings are not used.
 */
export function readDotenvFile(dir: string): DotenvFile {
  const file = path.join(dir, '.env');
  let content: string;
  try {
    content = readRegularFileSync(file, MAX_DOTENV_BYTES);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'EISDIR' || code === 'ENOTDIR') return { file, values: {}, problems: [] };
    const reason =
      code === 'EACCES' || code === 'EPERM' ? 'permission denied'
        : code === 'NOT_REGULAR' || code === 'TOO_LARGE' ? (error as Error).message
          : (code ?? 'unreadable');
    return { file, values: {}, problems: [], unreadable: reason };
  }
  return { file, ...parseDotenv(content) };
}

function refusal(code: string, message: string): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code });
}

/** A regular file's text, read without ever blocking on a special file; synchronous, since settings are resolved before anything else runs. */
function readRegularFileSync(file: string, maxBytes: number): string {
  const fd = openSync(file, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK | fsConstants.O_NOCTTY);
  try {
    const info = fstatSync(fd);
    if (info.isDirectory()) throw refusal('EISDIR', 'a directory');
    if (!info.isFile()) throw refusal('NOT_REGULAR', 'not a regular file (a FIFO, device or socket)');
    if (info.size > maxBytes) throw refusal('TOO_LARGE', `larger than ${Math.round(maxBytes / 1024)} KiB`);
    const buffer = Buffer.alloc(Math.min(info.size, maxBytes) + 1);
    let length = 0;
    for (let n = -1; n !== 0 && length < buffer.length; length += n) n = readSync(fd, buffer, length, buffer.length - length, null);
    if (length > maxBytes) throw refusal('TOO_LARGE', `larger than ${Math.round(maxBytes / 1024)} KiB`);
    return buffer.subarray(0, length).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

const DOTENV_NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;
const DOTENV_ASSIGNMENT = /^\s*(?:export\s+)?([^=]*?)\s*=\s*(.*)$/;
const QUOTES = ['"', "'", '`'];

/**
 * True for a line inside a quoted value that starts a variable (`NAME=…`): the quote was never closed. A line
 * of base64 (a PEM body, its `=` padding at the end) is part of the value.
 */
function startsVariable(line: string): boolean {
  const match = DOTENV_ASSIGNMENT.exec(line);
  return match !== null && DOTENV_NAME.test(match[1] ?? '') && !/^\s*[A-Za-z0-9+/]+=*\s*$/.test(line);
}

/**
 * Parses `.env` text the way Node's `util.parseEnv` (and dotenv) read a well-formed file: `NAME=value`, an
 * optional `export `, `#` comments, single, double (with `\n`) and backtick quotes, quoted values over several
 * lines. Unlike them it reports a malformed line by number and skips that line alone: Node's parser joins a
 * line without `=` to the next one's name, and lets an unclosed quote run on through the variables after it,
 * so one typo silently took the next setting (or made it part of a secret's value).
 */
export function parseDotenv(content: string): { values: Record<string, string>; problems: DotenvProblem[] } {
  const lines = content.replace(/\r\n?/g, '\n').split('\n');
  const values: Record<string, string> = {};
  const problems: DotenvProblem[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#')) continue;
    const match = DOTENV_ASSIGNMENT.exec(line);
    if (!match) {
      problems.push({ line: i + 1, message: 'expected NAME=value' });
      continue;
    }
    const name = match[1] as string;
    const rest = match[2] as string;
    if (!DOTENV_NAME.test(name)) {
      problems.push({ line: i + 1, message: 'the name before "=" is not a variable name (letters, digits, _ . -)' });
      continue;
    }
    const quote = rest[0];
    if (quote === undefined || !QUOTES.includes(quote)) {
      // Unquoted: up to a `#`, trimmed, as Node reads it.
      values[name] = rest.split('#')[0]?.trim() ?? '';
      continue;
    }
    let value: string | undefined;
    const close = rest.indexOf(quote, 1);
    if (close > 0) {
      value = rest.slice(1, close);
    } else {
      // A value over several lines ends at its closing quote, unless a variable starts first: then the quote
      // was never closed, and the lines after it are variables of their own.
      const parts = [rest.slice(1)];
      for (let j = i + 1; j < lines.length; j++) {
        const next = lines[j] as string;
        const end = next.indexOf(quote);
        if (startsVariable(end < 0 ? next : next.slice(0, end))) break;
        if (end >= 0) {
          parts.push(next.slice(0, end));
          value = parts.join('\n');
          i = j;
          break;
        }
        parts.push(next);
      }
      if (value === undefined) {
        problems.push({ line: i + 1, message: `the value's opening ${quote} is never closed` });
        continue;
      }
    }
    values[name] = quote === '"' ? value.replaceAll('\\n', '\n') : value;
  }
  return { values, problems };
}

// Read by syncauth besides the settings above: the endpoint override, and stack traces for bug reports.
const OTHER_VARIABLES: readonly string[] = [ENDPOINT_OVERRIDE_ENV, 'SYNCAUTH_DEBUG'];

export interface UnknownVariable {
  name: string;
  /** The setting it most likely meant, when one is close enough. */
  suggestion?: string;
}

/**
 * The `SYNCAUTH_*` names (any case) among `names` that syncauth does not read, each once, with the nearest
 * known name when it is a plausible typo. Only names are looked at, never values.
 */
export function unknownSettingVariables(names: Iterable<string>): UnknownVariable[] {
  const known = [...(Object.values(SETTINGS) as SettingSpec<unknown>[]).map((spec) => spec.env), ...OTHER_VARIABLES];
  const unknown: UnknownVariable[] = [];
  const seen = new Set<string>();
  for (const name of names) {
    if (!name.toUpperCase().startsWith('SYNCAUTH_') || known.includes(name) || seen.has(name)) continue;
    seen.add(name);
    const upper = name.toUpperCase();
    let best: { name: string; distance: number } | undefined;
    for (const candidate of known) {
      const distance = editDistance(upper, candidate);
      if (!best || distance < best.distance) best = { name: candidate, distance };
    }
    // A third of the part after the prefix may differ: SYNCAUTH_APIKEY finds SYNCAUTH_API_KEY, SYNCAUTH_FOO nothing.
    const allowed = Math.max(1, Math.floor((upper.length - 'SYNCAUTH_'.length) / 3));
    unknown.push(best && best.distance <= allowed ? { name, suggestion: best.name } : { name });
  }
  return unknown;
}

/**
 * The name among `candidates` that a mistyped `name` most likely meant, when a third of it at most differs (one
 * edit at least): `concurency` finds `concurrency`, `colour` nothing. For keys of a file, as flags get "did you mean".
 */
export function nearestName(name: string, candidates: Iterable<string>): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const candidate of candidates) {
    const distance = editDistance(name.toLowerCase(), candidate.toLowerCase());
    if (!best || distance < best.distance) best = { name: candidate, distance };
  }
  return best && best.distance <= Math.max(1, Math.floor(name.length / 3)) ? best.name : undefined;
}

/** Optimal string alignment distance: insertions, deletions, substitutions and swaps of neighbours. */
function editDistance(a: string, b: string): number {
  const rows: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 0; j <= b.length; j++) (rows[0] as number[])[j] = j;
  for (let i = 1; i <= a.length; i++) {
    const row = rows[i] as number[];
    const above = rows[i - 1] as number[];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row[j] = Math.min((above[j] as number) + 1, (row[j - 1] as number) + 1, (above[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        row[j] = Math.min(row[j] as number, ((rows[i - 2] as number[])[j - 2] as number) + 1);
      }
    }
  }
  return (rows[a.length] as number[])[b.length] as number;
}

export function resolveSettings(inputs: SettingInputs): ResolvedSettings {
  const env = inputs.env ?? {};
  const dotenv = inputs.dotenv ?? {};
  const trust = inputs.dotenvTrust ?? {};
  const values: Record<string, unknown> = {};
  const sources: Partial<Record<SettingName, SettingSource>> = {};
  const issues: FieldIssue[] = [];
  const given = (raw: unknown): boolean => raw !== undefined && raw !== null && raw !== '';

  // Where each secret comes from decides whether a `.env` may direct it, so that comes first: the grant, then
  // the API key (a `.env`'s key is itself passed over when the grant it would carry is not the `.env`'s).
  const secretFrom: Partial<Record<SecretSetting, SettingSource>> = {};
  for (const secret of [...GRANT, 'apiKey'] as const) {
    const variable = SETTINGS[secret].env;
    if (given(env[variable])) secretFrom[secret] = 'env';
    else if (given(dotenv[variable]) && !dotenvDestinationRefusal(secret, secretFrom, trust)) secretFrom[secret] = 'dotenv';
  }
  const passedOver: { name: SettingName; reason: string; raw: string }[] = [];

  for (const name of Object.keys(SETTINGS) as SettingName[]) {
    const spec = SETTINGS[name] as SettingSpec<unknown>;
    const label = spec.flag ? `--${spec.flag}` : spec.env;
    // The profile is the first setting resolved, so its choices are known for the rest.
    const chosen = typeof values.profile === 'string' ? inputs.configFile?.profiles[values.profile] : undefined;
    const candidates: [SettingSource, unknown, string][] = [
      ['flag', inputs.flags?.[name], label],
      ['env', env[spec.env], spec.env],
      ['dotenv', dotenv[spec.env], `${spec.env} (in .env)`],
      ['config', chosen?.[name], `${name} (in config.json, for profile "${String(values.profile)}")`],
      ['profile', inputs.profile?.[name], `${name} (in the profile state)`],
    ];
    let resolved = false;
    for (const [source, raw, where] of candidates) {
      // screenDotenv takes these out first; here too, so a `.env` never outranks the config file's choice.
      if (!given(raw) || (source === 'dotenv' && !spec.dotenv)) continue;
      if (source === 'flag' && spec.secret) {
        issues.push({ field: label, message: 'secrets are never taken from flags' });
        resolved = true;
        break;
      }
      const refusal = source === 'dotenv' ? dotenvDestinationRefusal(name, secretFrom, trust) : undefined;
      if (refusal) {
        passedOver.push({ name, reason: refusal, raw: String(raw) });
        if (spec.secret) registerSecrets(String(raw).trim());
        continue;
      }
      try {
        values[name] = typeof raw === 'string' ? spec.parse(raw) : raw;
        sources[name] = source;
        if (spec.secret) registerSecrets(values[name] as string);
      } catch (error) {
        // Never echo the rejected value: for a secret it would leak, for the rest the user has it already.
        issues.push({ field: where, message: (error as Error).message });
      }
      resolved = true;
      break;
    }
    if (!resolved && spec.default) {
      values[name] = spec.default();
      sources[name] = 'default';
    }
  }
  if (values.configDir === undefined && inputs.defaultConfigDir) {
    values.configDir = inputs.defaultConfigDir;
    sources.configDir = 'default';
  }
  registerAppCredentials(values.appKey as string | undefined, values.appSecret as string | undefined);
  if (issues.length > 0) throw new ValidationError(issues);
  // The config dir is judged here, where every command and the library learn it, before anything in it is read.
  let configDirVerdict: ConfigDirVerdict | undefined;
  if (typeof values.configDir === 'string' && inputs.configDirCheck !== 'skip') {
    const report = inputs.configDirCheck === 'report';
    const earlier = inputs.configDirVerdict;
    configDirVerdict = earlier?.given === values.configDir && (report || !earlier.refused) ? earlier : checkConfigDir(values.configDir, { report });
    if (configDirVerdict.refused && !report) throw configDirVerdict.refused;
    values.configDir = configDirVerdict.dir;
  }
  // Named only where the `.env` would have changed something: one that repeats the default or the recorded
  // endpoint steers nothing.
  const ignoredDotenv = passedOver
    .filter(({ name, raw }) => {
      try {
        return (SETTINGS[name] as SettingSpec<unknown>).parse(raw) !== values[name];
      } catch {
        return true;
      }
    })
    .map(({ name, reason }) => ({ name, reason }));
  return { values: values as Settings, sources, ignoredDotenv, ...(configDirVerdict ? { configDirVerdict } : {}) };
}

/** The flag for a setting, for messages such as "set --base-url or SYNCAUTH_BASE_URL". */
export function howToSet(name: SettingName): string {
  const spec = SETTINGS[name] as SettingSpec<unknown>;
  return spec.flag ? `--${spec.flag} or ${spec.env}` : spec.env;
}
