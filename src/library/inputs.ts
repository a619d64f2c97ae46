// What a library call's settings are resolved from, as a command would take them: the options it was given
// as flags, the environment it was given (default `process.env`), never a `.env`. The config dir is judged
// here, once (config-dir.ts): one others may write is refused before anything in it is read.
import { resolveSettings, type SettingInputs, type SettingName, type Settings } from '../config.js';

export interface LibraryInputOptions {
  profile?: string;
  configDir?: string;
  store?: 'keychain' | 'file' | 'env';
  env?: NodeJS.ProcessEnv;
}

export async function libraryInputs(options: LibraryInputOptions): Promise<{ inputs: SettingInputs; values: Settings }> {
  const flags: Partial<Record<SettingName, unknown>> = {};
  if (options.profile !== undefined) flags.profile = options.profile;
  if (options.configDir !== undefined) flags.configDir = options.configDir;
  if (options.store !== undefined) flags.store = options.store;
  const { default: envPaths } = await import('env-paths');
  const inputs: SettingInputs = { flags, env: { ...(options.env ?? process.env) }, dotenv: {}, defaultConfigDir: envPaths('syncauth', { suffix: '' }).config };
  const { values, configDirVerdict } = resolveSettings(inputs);
  return { inputs: { ...inputs, ...(configDirVerdict ? { configDirVerdict } : {}) }, values };
}
