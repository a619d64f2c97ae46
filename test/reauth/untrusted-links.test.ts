// A reauth-links.json the page may not believe: another user's (what an attacker leaves behind while the config
// dir was open to them) or writable by every user. The page refuses every link as it refuses a wrong one (the
// same 404 bytes and headers, counted by the rate limit), warns once naming the file, its owner and mode, never
// reads what the file says, and serves the link again once the file is this user's and private again.
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { LINKS_FILE_NAME } from '../../src/reauth/links.js';
import { OTHER_USER } from '../helpers/other-user.js';
import { approveAt, hrefOf, pathOf, startPageWorld, type Answer, type PageWorld } from './world.js';

/** What a browser sees of an answer, less what differs between any two (the date, the connection's state). */
function seen(answer: Answer): { status: number; headers: Record<string, unknown>; body: string } {
  const { date: _date, connection: _connection, 'keep-alive': _keepAlive, ...headers } = answer.headers;
  return { status: answer.status, headers, body: answer.body };
}

function records(world: PageWorld): Record<string, unknown>[] {
  return world.log.records();
}

const untrusted: [string, (file: string) => void][] = [
  ['owned by another user', (file) => chownSync(file, OTHER_USER.uid, OTHER_USER.gid)],
  ['writable by every user', (file) => chmodSync(file, 0o666)],
];

describe('an untrusted links file', () => {
  for (const [what, spoil] of untrusted) {
    it(`${what}: every link gets the wrong link's 404, one warning, and the link works again once the file is fixed`, async () => {
      const world = await startPageWorld();
      const live = pathOf(await world.mint());
      const wrongPath = `/reauthorize/${randomBytes(32).toString('base64url')}`;
      const wrong = await world.http(wrongPath);
      const wrongHead = await world.http(wrongPath, { method: 'HEAD' });
      expect(wrong.status).toBe(404);
      const file = path.join(world.configDir, LINKS_FILE_NAME);
      const { uid, gid, mode } = statSync(file);
      const before = readFileSync(file, 'utf8');
      spoil(file);

      const answers = [await world.http(live), await world.http(live), await world.http(live, { method: 'HEAD' })];
      for (const answer of answers.slice(0, 2)) expect(seen(answer)).toEqual(seen(wrong));
      expect(seen(answers[2] as Answer)).toEqual(seen(wrongHead));

      const logged = records(world);
      expect(logged.filter((r) => (r.level as number) > 40), JSON.stringify(logged)).toEqual([]);
      const warnings = logged.filter((r) => r.event === 'reauth.links_untrusted');
      expect(warnings, JSON.stringify(logged)).toHaveLength(1);
      const warning = warnings[0] as Record<string, unknown>;
      expect(warning.level).toBe(40);
      const stat = statSync(file);
      expect(warning).toMatchObject({ file, owner: stat.uid, mode: `0${(stat.mode & 0o7777).toString(8)}` });
      expect(JSON.stringify(logged)).not.toContain(live.slice('/reauthorize/'.length));
      // Never acted on: the file is as it was left.
      expect(readFileSync(file, 'utf8')).toBe(before);
      expect(statSync(file).uid).toBe(stat.uid);

      chownSync(file, uid, gid);
      chmodSync(file, mode & 0o7777);
      const again = await world.http(live);
      expect(again.status).toBe(200);
      expect(records(world).filter((r) => (r.level as number) > 40)).toEqual([]);
    });
  }

  it('a page opened before the file turned untrusted: its callback is refused as a wrong link, and nothing is stored', async () => {
    const world = await startPageWorld();
    const live = pathOf(await world.mint());
    const page = await world.http(live);
    expect(page.status).toBe(200);
    const back = await approveAt(hrefOf(page.body, 'authorize'));
    const wrong = await world.http(`/reauthorize/${randomBytes(32).toString('base64url')}`);
    const grant = world.stored();
    const file = path.join(world.configDir, LINKS_FILE_NAME);
    const before = readFileSync(file, 'utf8');
    chownSync(file, OTHER_USER.uid, OTHER_USER.gid);

    const answer = await world.http(pathOf(back.location as string));
    expect(seen(answer)).toEqual(seen(wrong));
    expect(world.stored()).toEqual(grant);
    expect(readFileSync(file, 'utf8')).toBe(before);
    expect(statSync(file).uid).toBe(OTHER_USER.uid);
    const logged = records(world);
    expect(logged.filter((r) => (r.level as number) > 40), JSON.stringify(logged)).toEqual([]);
    expect(logged.filter((r) => r.event === 'reauth.links_untrusted')).toHaveLength(1);
  });

  it('its refusals count against the client as any wrong link does', async () => {
    const world = await startPageWorld();
    const live = pathOf(await world.mint());
    chownSync(path.join(world.configDir, LINKS_FILE_NAME), OTHER_USER.uid, OTHER_USER.gid);
    const statuses: number[] = [];
    for (let i = 0; i < 25; i += 1) statuses.push((await world.http(live)).status);
    expect(statuses).toContain(429);
    expect(statuses.filter((s) => s === 404).length).toBeLessThanOrEqual(21);
    expect(statuses.filter((s) => s !== 404 && s !== 429)).toEqual([]);
    expect(records(world).filter((r) => r.event === 'reauth.links_untrusted')).toHaveLength(1);
  });
});
