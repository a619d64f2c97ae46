// What a command gets when it runs: resolved settings, output streams, and whether to print JSON.
import type { Command } from 'commander';
import { Option } from 'commander';
import { readDotenv, resolveSettings, SETTINGS, type ResolvedSettings, type SettingInputs, type SettingName } from '../config.js';
import { processIo, type Io } from './output.js';

export interface CommandContext {
  settings: ResolvedSettings;
  /** What the settings were resolved from, so a command can resolve them again with its profile's state. */
  inputs: SettingInputs;
  json: boolean;
  io: Io;
  stdin: NodeJS.ReadableStream;
}

const settingOptionsOf = new WeakMap<Command, SettingName[]>();

/** Adds the flags of the given settings to a command, with their env names in the help text. */
export function addSettingOptions(command: Command, names: SettingName[]): Command {
  for (const name of names) {
    const spec = SETTINGS[name] as { flag?: string; env: string; describe: string };
    if (!spec.flag) continue;
    const takesValue = name !== 'recursive';
    const option = new Option(`--${spec.flag}${takesValue ? ' <value>' : ''}`, `${spec.describe} (env ${spec.env})`);
    command.addOption(option);
    if (name === 'recursive') command.addOption(new Option('--no-recursive', 'do not read subfolders'));
  }
  settingOptionsOf.set(command, [...(settingOptionsOf.get(command) ?? []), ...names]);
  return command;
}

export async function buildContext(command: Command): Promise<CommandContext> {
  const options = command.opts<Record<string, unknown>>();
  const flags: Partial<Record<SettingName, unknown>> = {};
  for (const name of settingOptionsOf.get(command) ?? []) {
    const value = options[name];
    if (value !== undefined) flags[name] = typeof value === 'boolean' ? String(value) : value;
  }
  // Loaded here rather than at start-up: `syncauth --help` never needs it.
  const { default: envPaths } = await import('env-paths');
  const inputs: SettingInputs = {
    flags, env: process.env, dotenv: readDotenv(process.cwd()), defaultConfigDir: envPaths('syncauth', { suffix: '' }).config,
  };
  return { settings: resolveSettings(inputs), inputs, json: options.json === true, io: processIo, stdin: process.stdin };
}
