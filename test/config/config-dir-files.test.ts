// Files another user owns inside a config dir that passes the directory rule: left there while the directory was
// open to them (a 0777 directory of this user's, fixed with the `chmod go-w` the refusal suggests). Their owner
// may still rewrite them whenever they like, so syncauth reads none of them: the planted link digest opens no
// page, the planted profile state is not believed. Run as a real second user (uid 65534) through setpriv.
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkConfigDir } from '../../src/config-dir.js';
import { readConfigFile } from '../../src/profile/config-file.js';
import { openProfileStore } from '../../src/profile/index.js';
import { encodeRenewalRecord } from '../../src/profile/renewal-record.js';
import { fileLinkStore, hashToken, LINKS_FILE_NAME, mintLink } from '../../src/reauth/links.js';
import { tempDir } from '../helpers/cli.js';
import { PROFILE, startPageWorld } from '../reauth/world.js';

const NOBODY = 65534;

function asNobody(script: string, args: string[], input?: string): void {
  const result = spawnSync('setpriv', ['--reuid', String(NOBODY), '--regid', String(NOBODY), '--clear-groups', 'sh', '-ec', script, 'sh', ...args], { encoding: 'utf8', ...(input !== undefined ? { input } : {}) });
  expect(result.status, result.stderr).toBe(0);
}

/** This user's config dir, once open to every user and then locked down as the refusal's hint says; the parent other users may enter. */
function onceOpenDir(): string {
  const home = tempDir('syncauth-once-open-');
  chmodSync(home, 0o755);
  const dir = path.join(home, 'config');
  mkdirSync(dir);
  chmodSync(dir, 0o777);
  return dir;
}

describe('files another user owns in a config dir that passes the rule', () => {
  it('a link digest and a profile state uid 65534 left there before `chmod go-w` are never acted on: the link opens no page; nor is a hard link to a file of theirs', async () => {
    const dir = onceOpenDir();
    const world = await startPageWorld({ stores: { links: fileLinkStore(dir) } });
    // While the directory is open, uid 65534 makes its files there (its own: it may rewrite them at any time).
    // A hard link too: config.json, the same file as one it keeps in a directory of its own.
    const theirs = path.join(path.dirname(dir), 'theirs');
    mkdirSync(theirs);
    chownSync(theirs, NOBODY, NOBODY);
    asNobody('touch "$1/$2" && mkdir "$1/profiles" && touch "$1/profiles/$3.json" && echo "{}" > "$4/config" && ln "$4/config" "$1/config.json"', [dir, LINKS_FILE_NAME, PROFILE, theirs]);
    chmodSync(dir, 0o755);
    expect(checkConfigDir(dir).dir).toBe(dir);
    // After the lock-down, uid 65534 writes into its own files: a link for a token it knows, allowing any
    // account, and a profile state naming its Dropbox account.
    const scratch = tempDir('syncauth-once-open-scratch-');
    const { url: link } = await mintLink(fileLinkStore(scratch), { profile: PROFILE, publicUrl: world.publicUrl, allowAccountChange: true });
    await openProfileStore(scratch).update(PROFILE, () => ({ remoteUrl: 'dropbox://data', accountId: 'dbid:AAattackersaccount' }));
    asNobody('cat > "$1"', [path.join(dir, LINKS_FILE_NAME)], readFileSync(path.join(scratch, LINKS_FILE_NAME), 'utf8'));
    asNobody('cat > "$1"', [path.join(dir, 'profiles', `${PROFILE}.json`)], readFileSync(path.join(scratch, 'profiles', `${PROFILE}.json`), 'utf8'));
    expect(statSync(path.join(dir, LINKS_FILE_NAME)).uid).toBe(NOBODY);

    const page = await world.http(new URL(link).pathname);
    expect(page.status).not.toBe(200);
    expect(page.body).not.toContain('Allow');
    await expect(fileLinkStore(dir).find(hashToken(new URL(link).pathname.split('/').pop() as string), Date.now())).rejects.toThrow(/belongs to uid 65534/);
    await expect(openProfileStore(dir).read(PROFILE)).rejects.toThrow(/belongs to uid 65534/);
    await expect(readConfigFile(dir)).rejects.toThrow(/belongs to uid 65534/);
  });

  it("a renewal record uid 65534 left there is read as none: the expiry it claims does not hold the profile's renewal off", async () => {
    const dir = onceOpenDir();
    asNobody('mkdir "$1/profiles" && touch "$1/profiles/$2.renewed"', [dir, PROFILE]);
    chmodSync(dir, 0o755);
    const store = openProfileStore(dir);
    const renewed = new Date(Date.now() - 3_600_000).toISOString();
    await store.update(PROFILE, () => ({ remoteUrl: 'dropbox://data', accessTokenExpiresAt: renewed, lastRenewalAt: renewed }));
    // Its owner writes a record saying the token was renewed a moment ago and lasts a year.
    const record = encodeRenewalRecord(PROFILE, { accessTokenExpiresAt: Date.now() + 365 * 86_400_000, lastRenewalAt: Date.now() });
    asNobody('printf %s "$2" | base64 -d > "$1"', [path.join(dir, 'profiles', `${PROFILE}.renewed`), record.toString('base64')]);
    expect(statSync(path.join(dir, 'profiles', `${PROFILE}.renewed`)).uid).toBe(NOBODY);
    expect((await openProfileStore(dir).read(PROFILE))?.accessTokenExpiresAt).toBe(renewed);
  });
});
