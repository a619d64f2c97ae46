// A config dir of N profiles kept in the encrypted file store, and the daemon command's context over it, for
// the tests of how `syncauth daemon` loads stored profiles.
import { PassThrough } from 'node:stream';
import { createFactory, type Factory } from '../../src/cli/factory.js';
import type { CommandContext } from '../../src/cli/context.js';
import { resolveSettings, type SettingInputs } from '../../src/config.js';
import { openSecretStore } from '../../src/credentials/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { newHome, type Home } from '../helpers/onboarding.js';

export interface StoredProfilesHome {
  home: Home;
  /** The profiles' names, in the order a listing gives them: p000, p001, … */
  names: string[];
}

/** Writes `count` profiles (a grant each, a token URL no one answers on) through the package's own stores. */
export async function storedProfilesHome(count: number): Promise<StoredProfilesHome> {
  const home = newHome();
  const names = Array.from({ length: count }, (_, i) => `p${String(i).padStart(3, '0')}`);
  const secrets = openSecretStore({ kind: 'file', configDir: home.configDir, storeKey: home.storeKey, env: {} });
  const state = openProfileStore(home.configDir);
  for (const name of names) {
    await secrets.set(name, { app_key: `ak-${name}`, app_secret: `as-${name}`, refresh_token: `rt-${name}` });
    await state.update(name, () => ({ tokenUrl: 'http://127.0.0.1:9/oauth2/token' }));
  }
  return { home, names };
}

/** The context of a command run over `home` with the file store (or each profile's recorded one); `adapt` may replace parts of its factory. */
export function fileStoreContext(
  home: Home,
  adapt: (factory: Factory) => void = () => {},
  options: { storeFromConfig?: boolean } = {},
): CommandContext {
  // With storeFromConfig, SYNCAUTH_STORE is left unset: each profile's store is the one config.json names.
  const store = options.storeFromConfig ? {} : { SYNCAUTH_STORE: 'file' };
  const inputs: SettingInputs = {
    flags: {},
    env: { SYNCAUTH_CONFIG_DIR: home.configDir, ...store, SYNCAUTH_STORE_KEY: home.storeKey },
    dotenv: {},
  };
  const io = { stdout: new PassThrough(), stderr: new PassThrough() };
  const factory = createFactory({ env: () => ({ ...inputs.env }), io });
  adapt(factory);
  return { settings: resolveSettings(inputs), inputs, json: false, io, stdin: new PassThrough(), factory };
}
