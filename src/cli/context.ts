// What a command gets when it runs: resolved settings, output streams, and whether to print JSON.
import { constants as fsConstants } from 'node:fs';
import { access } from 'node:fs/promises';
import type { Command } from 'commander';
import { Option } from 'commander';
import {
  ENDPOINT_OVERRIDE_ENV, ENDPOINT_SETTINGS, readDotenvFile, resolveSettings, screenDotenv, SECRET_SETTINGS, SETTINGS, unknownSettingVariables,
  type DotenvFile, type DotenvTrust, type IgnoredDotenv, type ResolvedSettings, type SettingInputs, type SettingName,
} from '../config.js';
import { readConfigFile, type ConfigFile } from '../profile/config-file.js';
import { notePathRole } from './errno.js';
import type { Factory } from './factory.js';
import { note, warn, type Io } from './output.js';

export interface CommandContext {
  settings: ResolvedSettings;
  /** What the settings were resolved from, so a command can resolve them again with its profile's state. */
  inputs: SettingInputs;
  json: boolean;
  io: Io;
  stdin: NodeJS.ReadableStream;
  /** Where the command gets its service client, secret store, prompter and signals (see factory.ts). */
  factory: Factory;
  /**
   * The user asked, explicitly, to send a profile's secrets to endpoints other than the recorded ones: with
   * --endpoint-override or SYNCAUTH_ENDPOINT_OVERRIDE=1 in the process environment (never from `.env`).
   */
  endpointOverride?: boolean;
  /** The command records the profile's endpoints (setup), so an endpoint the user set explicitly replaces the recorded one. */
  recordsEndpoints?: boolean;
  /** Why the config dir's `config.json` could not be read; only a command that diagnoses (doctor) runs on without it. */
  configFileError?: unknown;
}

const settingOptionsOf = new WeakMap<Command, SettingName[]>();

// Setup is where a profile's endpoints are recorded with its secrets; running it again is how they change.
const COMMANDS_THAT_RECORD_ENDPOINTS = new Set(['setup']);

// Commands that run on with a config file that cannot be read, to say what is wrong with it.
const COMMANDS_THAT_DIAGNOSE = new Set(['doctor']);

// What a command asks for when neither the environment nor a `.env` has it: setup every secret (the grant by
// way of the browser), authorize the app's key and secret. A `.env` may not direct what is typed there.
const SECRETS_ASKED_FOR: Partial<Record<string, DotenvTrust['prompts']>> = {
  setup: ['apiKey', 'appKey', 'appSecret', 'refreshToken'],
  authorize: ['appKey', 'appSecret'],
};

// What each setting's value looks like in the help (`--listen <host:port>`); a setting missing here shows <value>.
const PLACEHOLDERS: Partial<Record<string, string>> = {
  profile: 'name', configDir: 'dir', store: 'keychain|file|env', baseUrl: 'url', apiKeyHeader: 'header', remoteUrl: 'dropbox://folder',
  access: 'read|write|read-write', connectorName: 'name', workflowId: 'uuid', schedule: 'schedule', authorizeUrl: 'url', tokenUrl: 'url',
  dropboxApiUrl: 'url', redirectUri: 'url', renewMargin: 'seconds', sweep: 'cron', tokenFile: 'path', tokenFileMode: 'mode',
  tokenFileGroup: 'group', socket: 'path', listen: 'host:port', redisUrl: 'url', logLevel: 'level', config: 'file',
  notifyFormat: 'standard|slack', notifyConnectorFailingAfter: 'seconds',
  reauthListen: 'host:port', publicUrl: 'url', reauthLinkTtl: 'duration', onReauthorized: 'command',
};

/** Adds the flags of the given settings to a command, with their env names in the help text. */
export function addSettingOptions(command: Command, names: SettingName[]): Command {
  for (const name of names) {
    const spec = SETTINGS[name] as { flag?: string; env: string; describe: string };
    if (!spec.flag) continue;
    const takesValue = name !== 'recursive';
    const option = new Option(`--${spec.flag}${takesValue ? ` <${PLACEHOLDERS[name] ?? 'value'}>` : ''}`, `${spec.describe} (env ${spec.env})`);
    command.addOption(option);
    if (name === 'recursive') command.addOption(new Option('--no-recursive', 'do not read subfolders'));
  }
  const before = settingOptionsOf.get(command) ?? [];
  const isEndpoint = (name: SettingName) => (ENDPOINT_SETTINGS as readonly SettingName[]).includes(name);
  if (!before.some(isEndpoint) && names.some(isEndpoint)) {
    command.addOption(new Option(
      '--endpoint-override',
      `use an endpoint other than the one recorded at setup, for this run (env ${ENDPOINT_OVERRIDE_ENV}=1, never read from .env)`,
    ));
  }
  settingOptionsOf.set(command, [...before, ...names]);
  return command;
}

export const SECRET_ENV_NAMES = SECRET_SETTINGS.map((name) => SETTINGS[name].env);

export async function buildContext(command: Command, factory: Factory): Promise<CommandContext> {
  const options = command.opts<Record<string, unknown>>();
  const flags: Partial<Record<SettingName, unknown>> = {};
  for (const name of settingOptionsOf.get(command) ?? []) {
    const value = options[name];
    if (value !== undefined) flags[name] = typeof value === 'boolean' ? String(value) : value;
  }
  const env = factory.env();
  const io = factory.io;
  const dotenvFile = readDotenvFile(factory.cwd());
  // Said before the settings are resolved: a bad line can be why a setting is then missing.
  warnAboutVariables(io, env, dotenvFile);
  const { dotenv, ignored } = screenDotenv(dotenvFile.values);
  // Loaded here rather than at start-up: `syncauth --help` never needs it.
  const { default: envPaths } = await import('env-paths');
  const records = COMMANDS_THAT_RECORD_ENDPOINTS.has(command.name());
  const prompts = SECRETS_ASKED_FOR[command.name()];
  const dotenvTrust: DotenvTrust = { ...(records ? { records } : {}), ...(prompts ? { prompts } : {}) };
  // The config dir is judged (config-dir.ts) before anything in it is read, by every command that opens it.
  const opensConfigDir = (settingOptionsOf.get(command) ?? []).includes('configDir');
  const configDirCheck = !opensConfigDir ? 'skip' : COMMANDS_THAT_DIAGNOSE.has(command.name()) ? 'report' : 'enforce';
  let inputs: SettingInputs = { flags, env, dotenv, defaultConfigDir: envPaths('syncauth', { suffix: '' }).config, dotenvTrust, configDirCheck };
  // The config dir comes from flags, the environment or the default, never from the file it holds; what setup
  // recorded there for each profile (the store) then resolves below the flags and the environment.
  const first = resolveSettings(inputs);
  if (first.configDirVerdict) inputs = { ...inputs, configDirVerdict: first.configDirVerdict };
  const { configFile, error: configFileError } = opensConfigDir && !first.configDirVerdict?.refused ? await loadConfigFile(first.values.configDir) : {};
  if (configFileError !== undefined && !COMMANDS_THAT_DIAGNOSE.has(command.name())) throw configFileError;
  if (configFile) inputs = { ...inputs, configFile };
  const settings = resolveSettings(inputs);
  const context: CommandContext = {
    settings,
    inputs,
    json: options.json === true,
    io,
    stdin: factory.stdin,
    factory,
    endpointOverride: options.endpointOverride === true || ['1', 'true'].includes(env[ENDPOINT_OVERRIDE_ENV]?.trim().toLowerCase() ?? ''),
    recordsEndpoints: records,
    ...(configFileError !== undefined ? { configFileError } : {}),
  };
  noteDotenv(context, ignored);
  notePathRoles(settings);
  return context;
}

/**
 * The config dir's `config.json`, or why it cannot be read. A config dir that is no directory, or one this user
 * may not enter, holds no file to read: the command then meets the directory itself and says what is wrong
 * with it (and which setting named it), as it did before the file existed.
 */
async function loadConfigFile(configDir: string): Promise<{ configFile?: ConfigFile; error?: unknown }> {
  try {
    const configFile = await readConfigFile(configDir);
    return configFile ? { configFile } : {};
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOTDIR') return {};
    if (code === 'EACCES' || code === 'EPERM') {
      const enterable = await access(configDir, fsConstants.X_OK).then(() => true, () => false);
      if (!enterable) return {};
    }
    return { error };
  }
}

/**
 * Warns, once per command and by name or line number only, about a `.env` line that was skipped and about
 * SYNCAUTH_ variables syncauth does not read: a misspelt setting otherwise looks like one that was ignored.
 */
function warnAboutVariables(io: Io, env: NodeJS.ProcessEnv, dotenv: DotenvFile): void {
  if (dotenv.unreadable) warn(io, `cannot read ${dotenv.file} (${dotenv.unreadable}); its settings are not used`);
  for (const problem of dotenv.problems) warn(io, `${dotenv.file} line ${problem.line}: ${problem.message}; the line is ignored`);
  const inEnv = new Set(Object.keys(env));
  const unknown = unknownSettingVariables([...inEnv, ...Object.keys(dotenv.values)]);
  for (const { name, suggestion } of unknown) {
    const where = inEnv.has(name) ? '' : ' (in .env)';
    warn(io, `${name}${where} is not a syncauth setting and is ignored${suggestion ? `; did you mean ${suggestion}?` : ''}`);
  }
}

/** Tells the error reporter which setting chose the paths a command works with, so an error about one can say. */
function notePathRoles(settings: ResolvedSettings): void {
  const { configDir, tokenFile, socket } = settings.values;
  const where = (name: 'configDir' | 'tokenFile' | 'socket') => `${SETTINGS[name].env} (--${SETTINGS[name].flag})`;
  if (configDir) {
    notePathRole({ path: configDir, kind: 'directory', what: `the config directory, ${SETTINGS.configDir.env}`, fix: `set ${where('configDir')} to a directory` });
  }
  if (tokenFile) notePathRole({ path: tokenFile, kind: 'file', what: `the token file, ${SETTINGS.tokenFile.env}`, fix: `set ${where('tokenFile')} to a file path` });
  if (socket) notePathRole({ path: socket, kind: 'file', what: `the socket, ${SETTINGS.socket.env}`, fix: `set ${where('socket')} to a file path` });
}

/**
 * Says on stderr, by name and never by value, what a `.env` in the working directory decided and what of it was
 * ignored and why, so a file that came with a clone cannot steer a command unseen. Stdout stays clean for
 * `token` and `--json`.
 */
function noteDotenv(context: CommandContext, ignored: string[]): void {
  const { io, settings } = context;
  const used = (Object.keys(settings.sources) as SettingName[])
    .filter((name) => settings.sources[name] === 'dotenv')
    .map((name) => SETTINGS[name].env);
  if (used.length > 0) note(io, `.env set ${used.join(', ')}`);
  if (ignored.length > 0) {
    note(io, `.env may not set ${ignored.join(', ')}; ignored (set ${ignored.length > 1 ? 'them' : 'it'} in the environment instead)`);
  }
  noteIgnoredDotenv(context, settings.ignoredDotenv);
}

const notedIgnored = new WeakMap<CommandContext, Set<string>>();

/**
 * Names, once per command, each setting a `.env` set that was passed over because it would direct secrets that
 * did not come from that `.env` (see DOTENV_DESTINATIONS), and why. Said before anything is sent.
 */
export function noteIgnoredDotenv(context: CommandContext, ignored: readonly IgnoredDotenv[]): void {
  const said = notedIgnored.get(context) ?? new Set<string>();
  notedIgnored.set(context, said);
  for (const { name, reason } of ignored) {
    if (said.has(name)) continue;
    said.add(name);
    const spec = SETTINGS[name] as { env: string; flag?: string };
    note(
      context.io,
      `${spec.env} in .env is ignored: ${reason}, and a .env may direct only its own secrets ` +
        `(to use it, set ${spec.env} in the environment${spec.flag ? ` or pass --${spec.flag}` : ''})`,
    );
  }
}
