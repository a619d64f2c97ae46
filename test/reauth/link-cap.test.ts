// A link sent in a notice keeps working whatever is minted after it: the daemon's three asks each carry a link
// of their own, and an operator then runs `syncauth reauth-link` again and again for a person who lost the
// notice. Every link the notices carried still opens; past the cap the command says so (exit 1, nothing on
// stdout) rather than dropping one.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openProfileStore } from '../../src/profile/index.js';
import { fileLinkStore, hashToken, LINKS_PER_PROFILE, linkMinter } from '../../src/reauth/links.js';
import { tempDir } from '../helpers/cli.js';
import { runInProcess } from '../helpers/in-process.js';

const PUBLIC = 'https://syncauth.example.com';

describe('links already sent', () => {
  it('reauth-link never revokes a link a notice carried; past the cap it refuses to mint', async () => {
    const dir = tempDir('syncauth-link-cap-');
    const configDir = path.join(dir, 'config');
    await openProfileStore(configDir).update('docs', () => ({ remoteUrl: 'dropbox://data', accountId: 'dbid:AAexampleaccount' }));
    // The three asks of a notice, minted as the daemon's notices mint them.
    const { linkFor } = linkMinter(fileLinkStore(configDir), { publicUrl: PUBLIC });
    const sent = [await linkFor('docs'), await linkFor('docs'), await linkFor('docs')].map((link) => link.url.split('/').pop() as string);

    const byHand: string[] = [];
    // Ten live links per profile: the three the notices sent, and seven by hand.
    for (let i = 0; i < 7; i += 1) {
      const result = await runInProcess(['reauth-link', '--profile', 'docs', '--public-url', PUBLIC], { cwd: dir });
      expect(result.code, result.stderr).toBe(0);
      byHand.push(result.stdout.trim());
      const store = fileLinkStore(configDir);
      for (const token of sent) expect(await store.find(hashToken(token), Date.now()), `a notice's link after ${i + 1} by hand`).toBeDefined();
    }
    expect(LINKS_PER_PROFILE).toBe(sent.length + byHand.length);
    const refused = await runInProcess(['reauth-link', '--profile', 'docs', '--public-url', PUBLIC], { cwd: dir });
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toContain(`already has ${LINKS_PER_PROFILE} live re-authorization links`);
    const store = fileLinkStore(configDir);
    for (const token of [...sent, ...byHand.map((url) => url.split('/').pop() as string)]) expect(await store.find(hashToken(token), Date.now())).toBeDefined();
  });
});
