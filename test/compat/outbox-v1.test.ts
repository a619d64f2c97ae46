// The notices' outbox as the previous format wrote it (test/fixtures/outbox-v1, see its README): this release
// reads it once and writes it back sealed at once (the link no longer in the clear); the waiting notice is due
// with the same link and webhook-id it had, and the reminder goes on. (The file now has version 2, which the
// previous format's reader refuses plainly: it logs notify.outbox_refused and leaves the file untouched.)
import { cpSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FileOutbox, OUTBOX_FILE, resolveNotifySettings } from '../../src/notify/index.js';
import { subkey } from '../../src/record-keys.js';
import { captureLog } from '../daemon/helpers.js';
import { ROOT, tempDir } from '../helpers/cli.js';

const FIXTURE = path.join(ROOT, 'test/fixtures/outbox-v1/notices.json');
const SECRET = `whsec_${Buffer.from('previous-release-notify-secret!!').toString('base64')}`;
const LINK = 'https://syncauth.example.com/reauthorize/PrevReleaseLinkToken0000000000000000000000';

describe('an outbox of version 1', () => {
  it('is read once, written sealed at once, and its notice due with the same link and id', async () => {
    const configDir = tempDir('syncauth-outbox-v1-');
    cpSync(FIXTURE, path.join(configDir, OUTBOX_FILE));
    const fixture = JSON.parse(readFileSync(FIXTURE, 'utf8')) as { deliveries: { id: string; firstAt: number }[] };
    const waiting = fixture.deliveries[0] as { id: string; firstAt: number };
    const log = captureLog();
    const settings = resolveNotifySettings({ urls: ['http://127.0.0.1:9/hook'], urlField: '--notify-url', secret: SECRET });
    const store = await FileOutbox.open(configDir, log.logger, subkey(settings.key as Buffer, 'outbox-file'));
    // Opening it rewrote it: version 2, the payload sealed, the link gone from the file.
    const rewritten = readFileSync(path.join(configDir, OUTBOX_FILE), 'utf8');
    expect(JSON.parse(rewritten)).toMatchObject({ version: 2, deliveries: [{ id: waiting.id, sealed: expect.any(Object) }], reminders: [{ profile: 'docs', mac: expect.any(String) }] });
    expect(rewritten).not.toContain('PrevReleaseLinkToken');
    // What is due is the notice as it was queued: the same id, the same link.
    expect(await store.due(waiting.firstAt + 60_000)).toEqual([
      expect.objectContaining({ id: waiting.id, payload: expect.objectContaining({ type: 'profile.reauthorization_needed', data: expect.objectContaining({ profile: 'docs', ask: 1, link: LINK }) }) }),
    ]);
    await store.close();
    // Opened again (the next start): the sealed file reads back the same, the reminder kept (asked once).
    const again = await FileOutbox.open(configDir, log.logger, subkey(settings.key as Buffer, 'outbox-file'));
    expect((await again.due(waiting.firstAt + 60_000)).map((d) => [d.id, d.payload.data.link])).toEqual([[waiting.id, LINK]]);
    expect(await again.reminders()).toEqual([expect.objectContaining({ profile: 'docs', asks: 1, transition: 'v1:OAUTH_INVALID_GRANT:abc' })]);
    expect(log.records().filter((r) => r.event === 'notify.record_refused')).toEqual([]);
  });
});
