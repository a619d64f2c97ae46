// The re-authorization page as a person and an attacker meet it, in-process beside a real daemon and the
// emulated Dropbox: the loop closes with the same account (stored, renewed, connector, check, link spent), and
// everything else changes nothing: a used, expired or forged link, another Dropbox account (whose grant is
// revoked), a tampered state, a wrong Host, a cross-site paste, a flood of wrong links. No answer carries a
// secret, and every answer carries the strict headers.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_EMULATOR_API_KEY } from '../../src/emulator/index.js';
import { LINKS_FILE_NAME } from '../../src/reauth/links.js';
import { approveAt, fieldOf, hrefOf, pathOf, PROFILE, startPageWorld, type PageWorld } from './world.js';

/** Renews, revokes the grant at Dropbox, sweeps again: the daemon parks the profile. */
async function revokeAndPark(world: PageWorld): Promise<string> {
  const first = await world.daemon.sweep();
  expect(first.profiles[0]).toMatchObject({ renewal: 'renewed' });
  const revoked = world.stored().refreshToken;
  world.emu.revokeGrant(revoked);
  const second = await world.daemon.sweep();
  expect(second.profiles[0]).toMatchObject({ renewal: 'reauthorization_needed' });
  expect(world.daemon.status().profiles[0]?.terminal?.reason).toBe('reauthorization_needed');
  return revoked;
}

function stateFile(world: PageWorld): string {
  return readFileSync(world.store.fileOf(PROFILE), 'utf8');
}

function linksFile(world: PageWorld): string {
  return readFileSync(path.join(world.configDir, LINKS_FILE_NAME), 'utf8');
}

function events(world: PageWorld): unknown[] {
  return world.log.records().map((r) => r.event);
}

/** Nothing secret in any answer the page gave, and the strict headers on every one. */
function expectCleanAnswers(world: PageWorld): void {
  const secrets = [
    world.app.appSecret,
    DEFAULT_EMULATOR_API_KEY,
    ...[...world.emu.state.grants.values()].flatMap((g) => (g.refreshToken ? [g.refreshToken] : [])),
    ...world.emu.state.accessTokens.keys(),
    ...[...world.emu.state.codes.keys()],
  ];
  expect(world.answers.length).toBeGreaterThan(0);
  for (const answer of world.answers) {
    const text = `${JSON.stringify(answer.headers)}\n${answer.body}`;
    for (const secret of secrets) expect(text.includes(secret), `a secret in an answer ${answer.status}`).toBe(false);
    expect(answer.headers['content-security-policy']).toMatch(/^default-src 'none'; style-src 'unsafe-inline'; form-action .+; frame-ancestors 'none'; base-uri 'none'$/);
    expect(answer.headers['cache-control']).toBe('no-store');
    expect(answer.headers['referrer-policy']).toBe('no-referrer');
    expect(answer.headers['x-content-type-options']).toBe('nosniff');
    expect(answer.headers['x-frame-options']).toBe('DENY');
  }
  // Nor in the log: no link token, state, code or grant.
  const log = world.log.lines.join('\n');
  for (const secret of secrets) expect(log.includes(secret)).toBe(false);
}

/** Opens the link and follows "Continue to Dropbox", approving as `accountId`; returns the callback path Dropbox sends back to. */
async function toDropboxAndBack(world: PageWorld, link: string, accountId?: string): Promise<string> {
  const page = await world.http(pathOf(link));
  expect(page.status).toBe(200);
  const authorize = new URL(hrefOf(page.body, 'authorize'));
  expect(authorize.searchParams.get('redirect_uri')).toBe(`${world.publicUrl}/reauthorize/callback`);
  expect(authorize.searchParams.get('code_challenge_method')).toBe('S256');
  expect(authorize.searchParams.get('token_access_type')).toBe('offline');
  expect(authorize.searchParams.get('state')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  const back = await approveAt(authorize.toString(), accountId);
  expect(back.location).toBeDefined();
  expect(back.location?.startsWith(`${world.publicUrl}/reauthorize/callback?`)).toBe(true);
  return pathOf(back.location as string);
}

describe('the re-authorization page', () => {
  it('closes the loop with the same account: stored, renewed, the connector updated, the check passed, the link spent', async () => {
    const world = await startPageWorld();
    const revoked = await revokeAndPark(world);
    const link = await world.mint();
    expect(link).toMatch(new RegExp(`^${world.publicUrl}/reauthorize/[A-Za-z0-9_-]{43}$`));
    // Only the digest is kept.
    expect(linksFile(world)).not.toContain(link.split('/').pop());

    const page = await world.http(pathOf(link));
    expect(page.body).toContain(`<dd id="profile">${PROFILE}</dd>`);
    expect(page.body).toContain('<dd id="folder">dropbox://data</dd>');
    expect(page.body).toContain(world.emu.state.account.accountId);
    expect(page.body).not.toMatch(/<script/i);
    // Opening it (twice, as a mail scanner and then the person) spends nothing.
    const callback = await toDropboxAndBack(world, link);
    expect(await world.links.outstanding(PROFILE, Date.now())).toHaveLength(1);

    const done = await world.http(callback);
    expect(done.status, done.body).toBe(200);
    expect(done.body).toContain('syncauth is authorized again');
    expect(done.body).toContain('The service&#39;s connection check passed.');
    const fresh = world.stored().refreshToken;
    expect(fresh).not.toBe(revoked);
    const status = world.daemon.status();
    expect(status.ready).toBe(true);
    expect(status.profiles[0]?.terminal).toBeUndefined();
    // The connector holds the new grant.
    const connector = [...(world.emu.state.workspaces.get('default')?.sources.values() ?? [])].find((s) => s.name === 'conn-docs');
    expect(connector?.config.refresh_token).toBe(fresh);
    const state = await world.store.read(PROFILE);
    expect(state).toMatchObject({ accountId: world.emu.state.account.accountId, needsReauthorization: false });
    expect(await world.links.outstanding(PROFILE, Date.now())).toEqual([]);
    expect(events(world)).toEqual(expect.arrayContaining(['reauth.page_opened', 'reauth.grant_stored', 'reauth.completed']));

    // Spent: the same link now gets the page every wrong link gets.
    const again = await world.http(pathOf(link));
    const forged = await world.http(`/reauthorize/${randomBytes(32).toString('base64url')}`);
    expect(again.status).toBe(404);
    expect(again.body).toBe(forged.body);
    // And the callback cannot be replayed.
    const replay = await world.http(callback);
    expect(replay.status).toBe(404);
    expect(replay.body).toBe(forged.body);
    expect(world.stored().refreshToken).toBe(fresh);
    expectCleanAnswers(world);
  });

  it('an expired link, a forged one, a malformed path and a wrong Host get one 404 body and open nothing', async () => {
    const world = await startPageWorld();
    const expired = await world.mint({ now: () => Date.now() - 73 * 3_600_000 });
    const live = await world.mint();
    const answers = [
      await world.http(pathOf(expired)),
      await world.http(`/reauthorize/${randomBytes(32).toString('base64url')}`),
      await world.http('/reauthorize/short'),
      await world.http('/metrics'),
      await world.http('/readyz'),
      await world.http(pathOf(live), { host: 'attacker.example' }),
      await world.http(pathOf(live), { host: `localhost:${new URL(world.publicUrl).port}` }),
    ];
    for (const answer of answers) {
      expect(answer.status).toBe(404);
      expect(answer.body).toBe(answers[0]?.body);
    }
    expect(answers[0]?.body).toContain('This link is not valid');
    expect(events(world)).not.toContain('reauth.page_opened');
    expect(events(world)).toEqual(expect.arrayContaining(['reauth.link_refused', 'reauth.host_refused', 'reauth.not_found']));
    // The live link still works, with the right Host.
    expect((await world.http(pathOf(live))).status).toBe(200);
    expectCleanAnswers(world);
  });

  it("another Dropbox account: refused, its grant revoked at Dropbox, nothing changed, the link still good", async () => {
    const world = await startPageWorld();
    const revoked = await revokeAndPark(world);
    const link = await world.mint();
    const stateBefore = stateFile(world);
    const other = world.emu.state.accounts[1];
    if (!other) throw new Error('the emulator has no second account');
    const callback = await toDropboxAndBack(world, link, other.accountId);
    const answer = await world.http(callback);
    expect(answer.status).toBe(200);
    expect(answer.body).toContain('Another Dropbox account');
    expect(answer.body).toContain("someone else&#39;s files");
    expect(answer.body).toContain('revoked at Dropbox');
    // The grant of the other account was made, then revoked.
    const otherGrants = [...world.emu.state.grants.values()].filter((g) => g.accountId === other.accountId);
    expect(otherGrants).toHaveLength(1);
    expect(otherGrants[0]?.revokedAt).not.toBeNull();
    // Nothing changed here.
    expect(world.stored().refreshToken).toBe(revoked);
    expect(stateFile(world)).toBe(stateBefore);
    expect(world.daemon.status().profiles[0]?.terminal?.reason).toBe('reauthorization_needed');
    expect(await world.links.outstanding(PROFILE, Date.now())).toHaveLength(1);
    expect(events(world)).toEqual(expect.arrayContaining(['reauth.account_mismatch', 'reauth.grant_revoked']));

    // The same link, with the profile's own account, still closes the loop.
    const own = await toDropboxAndBack(world, link);
    expect((await world.http(own)).body).toContain('syncauth is authorized again');
    expectCleanAnswers(world);
  });

  it('a link minted with --allow-account-change moves the profile to another account; a profile with no recorded account needs one', async () => {
    const world = await startPageWorld({ recordAccount: false });
    await revokeAndPark(world);
    const other = world.emu.state.accounts[1];
    if (!other) throw new Error('the emulator has no second account');
    // Without a recorded account a plain link cannot tell the profile's account from another.
    const plain = await world.mint();
    const refused = await world.http(pathOf(plain));
    expect(refused.body).toContain('No Dropbox account is recorded');
    expect(refused.body).not.toContain('id="authorize"');

    const change = await world.mint({ allowAccountChange: true });
    const callback = await toDropboxAndBack(world, change, other.accountId);
    const done = await world.http(callback);
    expect(done.body).toContain('syncauth is authorized again');
    expect((await world.store.read(PROFILE))?.accountId).toBe(other.accountId);
    // Every link of the profile is spent with the grant stored.
    expect((await world.http(pathOf(plain))).status).toBe(404);
    expectCleanAnswers(world);
  });

  it('a healthy profile moved to another account renews with the new grant at once, though its token is not due for minutes', async () => {
    const world = await startPageWorld({ renewMarginMs: 60_000 });
    expect((await world.daemon.sweep()).profiles[0]).toMatchObject({ renewal: 'renewed' });
    // Not due for minutes: only the new grant makes the daemon renew now.
    expect((await world.daemon.sweep()).profiles[0]?.action).toBe('idle');
    const before = world.stored().refreshToken;
    const other = world.emu.state.accounts[1];
    if (!other) throw new Error('the emulator has no second account');
    const callback = await toDropboxAndBack(world, await world.mint({ allowAccountChange: true }), other.accountId);
    const done = await world.http(callback);
    expect(done.body).toContain('syncauth is authorized again');
    const fresh = world.stored().refreshToken;
    expect(fresh).not.toBe(before);
    const connector = [...(world.emu.state.workspaces.get('default')?.sources.values() ?? [])].find((s) => s.name === 'conn-docs');
    expect(connector?.config.refresh_token).toBe(fresh);
    expectCleanAnswers(world);
  });

  it("a failed connection check: the grant is stored and the link spent, and the page says what failed", async () => {
    // The app folder has no /data: the connector is made and given the grant, but the service cannot read it.
    const world = await startPageWorld({ folders: { '/inbox': [] } });
    const revoked = await revokeAndPark(world);
    const done = await world.http(await toDropboxAndBack(world, await world.mint()));
    expect(done.status).toBe(200);
    expect(done.body).toContain('Authorized, but something failed');
    expect(done.body).toContain('The service&#39;s connection check failed: failed to connect to Dropbox: path/not_found');
    expect(done.body).not.toContain('syncauth is authorized again');
    expect(world.stored().refreshToken).not.toBe(revoked);
    expect(await world.links.outstanding(PROFILE, Date.now())).toEqual([]);
    expect(events(world)).toContain('reauth.failed');
    expectCleanAnswers(world);
  });

  it('a profile whose secrets are read-only (the env store): the page says so, and the daemon stores nothing', async () => {
    const world = await startPageWorld({ readOnly: true });
    const revoked = await revokeAndPark(world);
    const link = await world.mint();
    const page = await world.http(pathOf(link));
    expect(page.body).toContain('come from the environment');
    expect(page.body).not.toContain('id="authorize"');
    // Handed a grant all the same, the daemon refuses to pretend it stored it.
    const result = await world.daemon.reauthorized(PROFILE, { ...world.stored(), refreshToken: 'not-stored', accountId: world.emu.state.account.accountId });
    expect(result).toMatchObject({ stored: false });
    expect(result.error).toContain('read-only');
    expect(world.stored().refreshToken).toBe(revoked);
    expect(await world.links.outstanding(PROFILE, Date.now())).toHaveLength(1);
    expectCleanAnswers(world);
  });

  it('the env store with --on-reauthorized: the grant is held and handed to the command; a failed command is a warning on the success page', async () => {
    const handed: string[] = [];
    const world = await startPageWorld({
      readOnly: true,
      onReauthorized: async (_profile, grant) => {
        handed.push(grant.refreshToken);
        return { ok: false, message: 'it exited with code 1' };
      },
    });
    const revoked = await revokeAndPark(world);
    const link = await world.mint();
    const done = await world.http(await toDropboxAndBack(world, link));
    expect(done.status, done.body).toBe(200);
    expect(done.body).toContain('syncauth is authorized again');
    expect(done.body).toContain('Warning: The command that stores the new grant where a restart reads it (--on-reauthorized) failed: it exited with code 1.');
    expect(done.body).toContain('a restart would read the old one');
    // Nothing was written to the read-only store; the daemon renews with the grant it holds.
    expect(world.stored().refreshToken).toBe(revoked);
    expect(handed).toHaveLength(1);
    expect(handed[0]).not.toBe(revoked);
    expect(world.daemon.status().ready).toBe(true);
    expect(events(world)).toEqual(expect.arrayContaining(['reauth.grant_held', 'reauth.hook_failed', 'reauth.completed']));
    expect(await world.links.outstanding(PROFILE, Date.now())).toEqual([]);
    expectCleanAnswers(world);
  });

  it('a tampered state is refused and changes nothing; the genuine one still completes', async () => {
    const world = await startPageWorld();
    const revoked = await revokeAndPark(world);
    const link = await world.mint();
    const callback = await toDropboxAndBack(world, link);
    const url = new URL(callback, world.publicUrl);
    const state = url.searchParams.get('state') as string;
    const tampered = new URL(url);
    tampered.searchParams.set('state', `${state.slice(0, -2)}${state.endsWith('AA') ? 'BB' : 'AA'}`);
    const missing = new URL(url);
    missing.searchParams.delete('state');
    for (const bad of [tampered, missing]) {
      const answer = await world.http(pathOf(bad.toString()));
      expect(answer.status).toBe(404);
      expect(answer.body).toContain('This link is not valid');
    }
    expect(world.stored().refreshToken).toBe(revoked);
    expect(world.emu.state.codes.get(url.searchParams.get('code') as string)?.used).toBe(false);
    expect(events(world)).toContain('reauth.state_refused');
    expect((await world.http(callback)).body).toContain('syncauth is authorized again');
    expectCleanAnswers(world);
  });

  it("the paste form: Dropbox's code display, the code posted back from the page; a post without the page's form token or from another site is refused", async () => {
    const world = await startPageWorld();
    const revoked = await revokeAndPark(world);
    const link = await world.mint();
    /** The page opened, Dropbox's code display approved: what the page's form would send. */
    const render = async (): Promise<{ page: string; state: string; formToken: string; code: string }> => {
      const page = await world.http(pathOf(link));
      const display = new URL(hrefOf(page.body, 'code-display'));
      expect(display.searchParams.has('redirect_uri')).toBe(false);
      expect(display.searchParams.get('code_challenge_method')).toBe('S256');
      const shown = await approveAt(display.toString());
      const code = /<code id="code">([^<]+)<\/code>/.exec(shown.html)?.[1];
      if (!code) throw new Error('no code displayed');
      const state = fieldOf(page.body, 'state');
      const formToken = fieldOf(page.body, 'form_token');
      // The form token is in no URL: not in Dropbox's, nor in the redirect's.
      expect(page.body.split(formToken)).toHaveLength(2);
      expect(display.toString()).not.toContain(formToken);
      return { page: page.body, state, formToken, code };
    };
    const post = (to: string, fields: Record<string, string>, headers: Record<string, string> = {}) =>
      world.http(pathOf(to), { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body: new URLSearchParams(fields).toString() });

    // The state is bound to the link whose page handed it out, and to the paste path: posted to another link,
    // or the redirect's state posted here, it is refused (and spent).
    const first = await render();
    const otherLink = await world.mint();
    expect((await post(otherLink, { state: first.state, form_token: first.formToken, code: first.code })).status).toBe(404);
    const redirectState = new URL(hrefOf(first.page, 'authorize')).searchParams.get('state') as string;
    expect((await post(link, { state: redirectState, form_token: first.formToken, code: first.code })).status).toBe(404);
    expect(world.emu.state.codes.get(first.code)?.used).toBe(false);

    // A page on another site that learned a state (it is in Dropbox's URL) has no form token: refused, even
    // with the right Origin, and the round is spent.
    const stolen = await render();
    expect((await post(link, { state: stolen.state, code: stolen.code }, { origin: world.publicUrl })).status).toBe(403);
    expect((await post(link, { state: stolen.state, form_token: stolen.formToken, code: stolen.code })).status).toBe(404);
    // Another round's token does not fit.
    const a = await render();
    const b = await render();
    expect((await post(link, { state: a.state, form_token: b.formToken, code: a.code })).status).toBe(403);
    // What the browser says of another site is refused before anything is read.
    expect((await post(link, { state: b.state, form_token: b.formToken, code: b.code }, { origin: 'https://attacker.example' })).status).toBe(403);
    expect((await post(link, { state: b.state, form_token: b.formToken, code: b.code }, { 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    expect(world.stored().refreshToken).toBe(revoked);
    expect(events(world)).toContain('reauth.form_refused');

    // The page's own form, as a browser sends it under the page's no-referrer policy (Origin: null).
    const done = await post(link, { state: b.state, form_token: b.formToken, code: b.code }, { origin: 'null', 'sec-fetch-site': 'same-origin' });
    expect(done.status, done.body).toBe(200);
    expect(done.body).toContain('syncauth is authorized again');
    expect(world.stored().refreshToken).not.toBe(revoked);
    expectCleanAnswers(world);
  });

  it("the paste form rendered by one replica is accepted by another: the form token is the round's, not the process's", async () => {
    const world = await startPageWorld();
    const revoked = await revokeAndPark(world);
    const link = await world.mint();
    const page = await world.http(pathOf(link));
    const shown = await approveAt(new URL(hrefOf(page.body, 'code-display')).toString());
    const code = /<code id="code">([^<]+)<\/code>/.exec(shown.html)?.[1] as string;
    const other = await world.replica();
    const done = await other(pathOf(link), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ state: fieldOf(page.body, 'state'), form_token: fieldOf(page.body, 'form_token'), code }).toString(),
    });
    expect(done.status, done.body).toBe(200);
    expect(done.body).toContain('syncauth is authorized again');
    expect(world.stored().refreshToken).not.toBe(revoked);
    expectCleanAnswers(world);
  });

  it('1,000 wrong links in a minute: rate-limited, nothing changes, and renewals go on', async () => {
    const world = await startPageWorld();
    const link = await world.mint();
    await world.daemon.sweep();
    const stateBefore = stateFile(world);
    const linksBefore = linksFile(world);
    const counts = new Map<number, number>();
    for (let batch = 0; batch < 20; batch += 1) {
      const answers = await Promise.all(
        Array.from({ length: 50 }, () => world.http(`/reauthorize/${randomBytes(32).toString('base64url')}`)),
      );
      for (const answer of answers) counts.set(answer.status, (counts.get(answer.status) ?? 0) + 1);
    }
    expect((counts.get(404) ?? 0) + (counts.get(429) ?? 0)).toBe(1_000);
    // A burst of 20 (counted before each lookup, so concurrent requests cannot all slip through), then a trickle.
    expect(counts.get(404) ?? 0).toBeLessThanOrEqual(30);
    expect(counts.get(429) ?? 0).toBeGreaterThanOrEqual(970);
    expect(stateFile(world)).toBe(stateBefore);
    expect(linksFile(world)).toBe(linksBefore);
    expect(await world.links.outstanding(PROFILE, Date.now())).toHaveLength(1);
    // Logged once, not a thousand times.
    expect(events(world).filter((e) => e === 'reauth.rate_limited')).toHaveLength(1);
    const renewal = await world.daemon.sweep();
    expect(renewal.profiles[0]).toMatchObject({ renewal: 'renewed' });
    expect(link).toBeTruthy();
    expectCleanAnswers(world);
  });
});
