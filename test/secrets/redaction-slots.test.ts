// A secret learnt again and again (each access token of a profile) takes a slot in the redaction registry: the
// new value's spellings replace the last one's, so a daemon renewing for a year holds one token per profile
// there, not every token it has seen; what was registered for good stays registered whatever the slots do.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { startDaemon } from '../../src/daemon/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { redact, REDACTED, registeredFormCount, registerSecrets, registerSlotSecret } from '../../src/redact.js';
import { captureLog, emulator, obtainGrant, profileOf, tempDir } from '../daemon/helpers.js';

const tokenNumber = (i: number): string => `sl.slot-test-token-${String(i).padStart(6, '0')}-${'t'.repeat(24)}`;

describe('a slot of the redaction registry', () => {
  it('holds the last value only: after 1,000 renewals of one profile the registry is the size it was after the first', () => {
    registerSlotSecret('access_token:one', tokenNumber(0));
    const afterFirst = registeredFormCount();
    for (let i = 1; i <= 1_000; i += 1) registerSlotSecret('access_token:one', tokenNumber(i));
    expect(registeredFormCount()).toBe(afterFirst);
    const latest = tokenNumber(1_000);
    expect(redact(`echo ${latest} ${encodeURIComponent(latest)} ${Buffer.from(latest).toString('base64')}`)).toBe(`echo ${REDACTED} ${REDACTED} ${REDACTED}`);
    // The value it held before is the slot's no more.
    expect(redact(`old ${tokenNumber(999)}`)).toBe(`old ${tokenNumber(999)}`);
    registerSlotSecret('access_token:one', undefined);
    expect(redact(`gone ${latest}`)).toBe(`gone ${latest}`);
  });

  it('never unregisters a value registered for good, nor one another slot still holds', () => {
    const forGood = 'slot-test-registered-for-good-secret';
    registerSecrets(forGood);
    registerSlotSecret('access_token:a', forGood);
    registerSlotSecret('access_token:a', 'slot-test-next-value-of-a');
    expect(redact(forGood)).toBe(REDACTED);

    const shared = 'slot-test-value-two-slots-hold';
    registerSlotSecret('access_token:b', shared);
    registerSlotSecret('access_token:c', shared);
    registerSlotSecret('access_token:b', 'slot-test-next-value-of-b');
    expect(redact(shared)).toBe(REDACTED);
    registerSlotSecret('access_token:c', undefined);
    expect(redact(shared)).toBe(shared);
  });

  it('a daemon renewing one profile again and again keeps the registry flat', async () => {
    const emu = await emulator({ tokenLifetimeSeconds: 20 });
    const grant = await obtainGrant(emu);
    // A margin longer than the tokens live: every sweep renews.
    const tokenFile = path.join(tempDir(), 'token');
    const daemon = await startDaemon({
      profiles: [profileOf(emu, { name: 'flat', grant })],
      profileStore: openProfileStore(tempDir()),
      renewMarginMs: 60_000,
      schedule: false,
      tokenFile,
      logger: captureLog('info').logger,
    });
    try {
      expect((await daemon.sweep()).profiles[0]?.renewal).toBe('renewed');
      const afterFirst = registeredFormCount();
      for (let i = 0; i < 100; i += 1) expect((await daemon.sweep()).profiles[0]?.renewal).toBe('renewed');
      expect(registeredFormCount()).toBe(afterFirst);
      // And the token it holds now is registered.
      const held = readFileSync(tokenFile, 'utf8').trim();
      expect(redact(`held ${held}`)).toBe(`held ${REDACTED}`);
    } finally {
      await daemon.close();
    }
  });
});
