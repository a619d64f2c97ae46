// Terminal failures: a revoked grant parks its profile at once, with one error line naming the command to
// run, no further token requests for it, and no effect on the other profiles; new secrets un-park it.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_APP } from '../../src/emulator/index.js';
import { newSecretsVersion } from '../../src/profile/index.js';
import { baseState } from '../../src/sync/renew.js';
import { drive, obtainGrant, renewalsOf, startWorld, tempDir, tokenRequests } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

describe('parking a profile', () => {
  it('flags a revoked grant within one sweep, logs once, stops asking for it, and resumes on new secrets', async () => {
    const tokenFile = path.join(tempDir(), '{profile}.token');
    const world = await startWorld({ profiles: ['docs', 'other'], daemon: { tokenFile } });
    await drive(world, 10, 1000);
    const docs = world.grants.get('docs');
    const other = world.grants.get('other');
    if (!docs || !other) throw new Error('grants missing');
    expect(renewalsOf(world.emu, docs.refreshToken)).toBe(1);

    // The user unlinks the app; the next renewal of docs is due now.
    world.emu.revokeGrant(docs.refreshToken);
    world.clock.advance(5_000);
    const report = await world.daemon.sweep();
    expect(report.profiles.find((p) => p.profile === 'docs')).toMatchObject({ action: 'renewal', renewal: 'reauthorization_needed' });
    const status = world.daemon.status();
    const docsStatus = status.profiles.find((p) => p.name === 'docs');
    expect(docsStatus).toMatchObject({ ready: false, holdsToken: false, terminal: { reason: 'reauthorization_needed', code: 'OAUTH_INVALID_GRANT' } });
    expect(docsStatus?.reason).toContain('syncauth setup --profile docs');
    expect(status.ready).toBe(false);
    // The revoked grant's tokens are dead: the file goes at once, not at expiry (the hand-moved clock stays put
    // while this waits; the removal runs on the profile's file chain, beside the sweep).
    await waitFor('the revoked grant\'s token file removed', () => (existsSync(tokenFile.replace('{profile}', 'docs')) ? undefined : true));
    const state = await world.store.read('docs');
    expect(state).toMatchObject({ needsReauthorization: true, lastError: { code: 'OAUTH_INVALID_GRANT', terminal: true } });

    // Many more sweeps: not one token request for docs, while other keeps renewing.
    const requestsBefore = tokenRequests(world.emu);
    const otherBefore = renewalsOf(world.emu, other.refreshToken);
    await drive(world, 120, 1000);
    const otherRenewals = renewalsOf(world.emu, other.refreshToken) - otherBefore;
    expect(otherRenewals).toBeGreaterThanOrEqual(7);
    expect(tokenRequests(world.emu) - requestsBefore).toBe(otherRenewals);
    expect(world.daemon.status().profiles.find((p) => p.name === 'other')?.ready).toBe(true);

    const errors = world.log.records().filter((r) => Number(r.level) >= 50);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ profile: 'docs', errorCode: 'OAUTH_INVALID_GRANT' });
    expect(String(errors[0]?.msg)).toContain('`syncauth setup --profile docs`');

    // `syncauth setup` again: a new grant in the store, a new secrets version in the state.
    const fresh = await obtainGrant(world.emu, DEFAULT_APP);
    world.grants.set('docs', fresh);
    await world.store.update('docs', (current) => ({ ...baseState(current), secretsVersion: newSecretsVersion() }));
    const resumed = await world.daemon.sweep();
    expect(resumed.profiles.find((p) => p.profile === 'docs')).toMatchObject({ action: 'renewal', renewal: 'renewed' });
    expect(renewalsOf(world.emu, fresh.refreshToken)).toBe(1);
    expect(world.daemon.status()).toMatchObject({ ready: true });
    expect(existsSync(tokenFile.replace('{profile}', 'docs'))).toBe(true);
    expect((await world.store.read('docs'))?.needsReauthorization).toBe(false);
  });

  it('parks a configuration error (invalid_client) without touching the other profiles, and un-parks on reload with new secrets', async () => {
    const world = await startWorld({ profiles: ['bad', 'good'] });
    // The app secret was mistyped in the store.
    const bad = world.grants.get('bad');
    if (!bad) throw new Error('grant missing');
    world.grants.set('bad', { ...bad, appSecret: 'wrong-secret-value' });
    await world.daemon.reload();
    const first = await world.daemon.sweep();
    expect(first.profiles.find((p) => p.profile === 'bad')).toMatchObject({ renewal: 'configuration_error' });
    expect(first.profiles.find((p) => p.profile === 'good')).toMatchObject({ renewal: 'renewed' });
    const before = tokenRequests(world.emu);
    await drive(world, 30, 1000);
    // Only good's renewals reached the token endpoint.
    expect(tokenRequests(world.emu) - before).toBe(renewalsOf(world.emu, world.grants.get('good')?.refreshToken ?? '') - 1);
    expect(world.daemon.status().profiles.find((p) => p.name === 'bad')).toMatchObject({
      ready: false,
      terminal: { reason: 'configuration_error', code: 'OAUTH_INVALID_CLIENT' },
    });
    const errors = world.log.records().filter((r) => Number(r.level) >= 50);
    expect(errors).toHaveLength(1);
    expect(JSON.stringify(errors)).not.toContain('wrong-secret-value');

    world.grants.set('bad', bad);
    await world.daemon.reload();
    const fixed = await world.daemon.sweep();
    expect(fixed.profiles.find((p) => p.profile === 'bad')).toMatchObject({ renewal: 'renewed' });
  });
});
