// Link storage: digests only, found again by a fresh store (a restart), live links never dropped but capped per
// profile, every link of a profile spent at once (and no other profile's), expired ones never found, a broken
// file refused.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { fileLinkStore, hashToken, LINKS_FILE_NAME, LINKS_PER_PROFILE, linkMinter, mintLink } from '../../src/reauth/links.js';
import { tempDir } from '../helpers/cli.js';

const PUBLIC = 'https://syncauth.example.com';
const tokenOf = (url: string): string => url.split('/').pop() as string;

describe('re-authorization links', () => {
  it('linkFor mints a new link each call, kept as a digest that a restarted store still finds', async () => {
    const configDir = tempDir('syncauth-links-');
    const { linkFor } = linkMinter(fileLinkStore(configDir), { publicUrl: `${PUBLIC}/`, ttlMs: 3_600_000 });
    const a = await linkFor('docs');
    const b = await linkFor('docs');
    expect(a.url).not.toBe(b.url);
    expect(a.url).toMatch(/^https:\/\/syncauth\.example\.com\/reauthorize\/[A-Za-z0-9_-]{43}$/);
    const file = readFileSync(path.join(configDir, LINKS_FILE_NAME), 'utf8');
    expect(file).not.toContain(tokenOf(a.url));
    const restarted = fileLinkStore(configDir);
    expect(await restarted.find(hashToken(tokenOf(a.url)), Date.now())).toMatchObject({ profile: 'docs', allowAccountChange: false });
    expect(await restarted.find(hashToken('x'.repeat(43)), Date.now())).toBeUndefined();
  });

  it('never drops a live link: past the cap a mint is refused and keeps nothing; an expired link makes room; spending one profile leaves the others', async () => {
    const configDir = tempDir('syncauth-links-');
    const store = fileLinkStore(configDir);
    let clock = 1_000_000;
    const now = () => (clock += 1_000);
    const docs = [];
    docs.push(tokenOf((await mintLink(store, { profile: 'docs', publicUrl: PUBLIC, now, ttlMs: 30_000 })).url));
    for (let i = 1; i < LINKS_PER_PROFILE; i += 1) docs.push(tokenOf((await mintLink(store, { profile: 'docs', publicUrl: PUBLIC, now })).url));
    const other = tokenOf((await mintLink(store, { profile: 'other', publicUrl: PUBLIC, now, ttlMs: 60_000 })).url);
    const before = readFileSync(path.join(configDir, LINKS_FILE_NAME), 'utf8');
    await expect(mintLink(store, { profile: 'docs', publicUrl: PUBLIC, now })).rejects.toMatchObject({ code: 'REAUTH_LINKS_FULL' });
    expect(readFileSync(path.join(configDir, LINKS_FILE_NAME), 'utf8')).toBe(before);
    const at = clock;
    for (const token of docs) expect(await store.find(hashToken(token), at)).toBeDefined();
    // Once the first has expired, there is room for one more.
    clock += 30_000;
    const later = tokenOf((await mintLink(store, { profile: 'docs', publicUrl: PUBLIC, now })).url);
    expect(await store.find(hashToken(docs[0] as string), clock)).toBeUndefined();
    expect(await store.outstanding('docs', clock)).toHaveLength(LINKS_PER_PROFILE);
    expect(await store.spend('docs')).toBe(LINKS_PER_PROFILE);
    expect(await store.find(hashToken(later), clock)).toBeUndefined();
    expect(await store.outstanding('docs', clock)).toEqual([]);
    expect(await store.find(hashToken(other), clock)).toMatchObject({ profile: 'other' });
    expect(await store.find(hashToken(other), clock + 60_000)).toBeUndefined();
  });

  it('a links file that does not parse is refused, not half read', async () => {
    const configDir = tempDir('syncauth-links-');
    const store = fileLinkStore(configDir);
    await mintLink(store, { profile: 'docs', publicUrl: PUBLIC });
    writeFileSync(path.join(configDir, LINKS_FILE_NAME), '{"version":9,"links":[]}');
    await expect(store.find(hashToken('x'.repeat(43)), Date.now())).rejects.toMatchObject({ code: 'REAUTH_LINKS_CORRUPT' });
  });
});
