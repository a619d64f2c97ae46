// `openProfileStore` for a program that imports syncauth: the profiles of a config dir, judged first as every
// command judges it (config-dir.ts): one another user may write is refused (exit-2 kind `bad_input`), one
// root shares with others (a Kubernetes emptyDir) is used through `<dir>/syncauth-<uid>/`.
import { checkConfigDir } from '../config-dir.js';
import { openProfileStore as openStore, type ProfileStore, type ProfileStoreOptions } from '../profile/index.js';

export function openProfileStore(configDir: string, options?: ProfileStoreOptions): ProfileStore {
  return openStore(checkConfigDir(configDir).dir, options);
}
