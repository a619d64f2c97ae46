// config.json keeps what setup chose per profile; setups of different profiles may run at once.
import { describe, expect, it } from 'vitest';
import { readConfigFile, recordProfileChoices } from '../../src/profile/config-file.js';
import { tempDir } from '../helpers/cli.js';

describe('config.json', () => {
  it('keeps every profile when many record their choice at once', async () => {
    const dir = tempDir('syncauth-config-file-');
    const names = Array.from({ length: 20 }, (_, i) => `p${i}`);
    await Promise.all(names.map((name, i) => recordProfileChoices(dir, name, { store: i % 2 === 0 ? 'file' : 'keychain' })));
    const config = await readConfigFile(dir);
    expect(Object.keys(config?.profiles ?? {}).sort()).toEqual([...names].sort());
    expect(config?.profiles.p0).toEqual({ store: 'file' });
    expect(config?.profiles.p1).toEqual({ store: 'keychain' });
  });
});
