// The one redaction step: every secret the process has read is cut out, in every form it travels in, of
// every error message, log line and state field.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { reportError } from '../../src/cli/output.js';
import { createLogger } from '../../src/log.js';
import { OAuthError, scrub } from '../../src/oauth/errors.js';
import { openProfileStore } from '../../src/profile/index.js';
import { redact, registerAppCredentials, registerSecrets } from '../../src/redact.js';
import { ServiceError } from '../../src/service/errors.js';
import { tempDir } from '../helpers/cli.js';

const APP_KEY = 'redactAppKey4kq9z';
const APP_SECRET = 'redact+App/Secret=w7 x';
const REFRESH = 'redactRefresh~Token!8842';
registerAppCredentials(APP_KEY, APP_SECRET);
registerSecrets(REFRESH);

/** Every spelling of the secrets above that a provider, a log or a message could carry. */
const FORMS = [
  APP_KEY, APP_SECRET, REFRESH,
  encodeURIComponent(APP_SECRET), new URLSearchParams({ s: APP_SECRET }).toString().slice(2),
  encodeURIComponent(REFRESH), new URLSearchParams({ r: REFRESH }).toString().slice(2),
  Buffer.from(`${APP_KEY}:${APP_SECRET}`).toString('base64'),
  Buffer.from(`${APP_KEY}:${new URLSearchParams({ s: APP_SECRET }).toString().slice(2)}`).toString('base64'),
];
const ECHO = `Basic ${FORMS[7]} client_id=${APP_KEY}&client_secret=${FORMS[4]}&refresh_token=${FORMS[6]} raw ${APP_SECRET} ${REFRESH} json ${JSON.stringify(APP_SECRET)} uri ${FORMS[3]} ${FORMS[5]} form-encoded Basic ${FORMS[8]}`;

function leaks(text: string): string[] {
  return FORMS.filter((form) => text.includes(form));
}

describe('redact', () => {
  it('cuts out each registered secret raw, percent- and form-encoded, JSON-escaped, and the Basic credential', () => {
    expect(leaks(ECHO)).toEqual(FORMS);
    const out = redact(ECHO);
    expect(leaks(out)).toEqual([]);
    expect(out).toContain('Basic [redacted] client_id=[redacted]&client_secret=[redacted]&refresh_token=[redacted]');
  });

  it('leaves values too short to be a secret alone, and takes extra values for one message', () => {
    registerSecrets('short');
    expect(redact('a short word')).toBe('a short word');
    expect(redact('code=abc123xyz here', ['abc123xyz'])).toBe('code=[redacted] here');
  });

  it('finds a secret at the very start and end of a text, two side by side, and a text that is one', () => {
    registerSecrets('edgeSecret-91kd', 'edgeOther-72jq', 'end8ch4r');
    expect(redact('a line, then end8ch4r')).toBe('a line, then [redacted]');
    expect(redact('edgeSecret-91kd')).toBe('[redacted]');
    expect(redact('edgeSecret-91kdedgeOther-72jq')).toBe('[redacted][redacted]');
    expect(redact('edgeSecret-91kd middle edgeOther-72jq')).toBe('[redacted] middle [redacted]');
    expect(redact('xedgeSecret-91k edgeOther-72j')).toBe('xedgeSecret-91k edgeOther-72j');
    expect(redact(`a${Buffer.from('edgeOther-72jq').toString('hex').toUpperCase()}`)).toBe('a[redacted]');
  });

  it('with the secrets of 10,000 profiles registered, still cuts out each, the longest where forms overlap', () => {
    const many = Array.from({ length: 10_000 }, (_, i) => `sl.many-profile-refresh-${String(i).padStart(5, '0')}-${'x'.repeat(20)}`);
    registerSecrets(...many);
    // One secret that begins another: the longer is cut whole, the shorter where it stands alone.
    registerSecrets('overlap-secret-AAAA', 'overlap-secret-AAAA-and-more');
    const line = `a ${many[0]} b "${many[9_999]}" c refresh_token=${encodeURIComponent(many[5_000] as string)}&x ` +
      `overlap-secret-AAAA-and-more overlap-secret-AAAA ${Buffer.from(many[42] as string).toString('base64')} end`;
    expect(redact(line)).toBe('a [redacted] b "[redacted]" c refresh_token=[redacted]&x [redacted] [redacted] [redacted] end');
    // And what merely looks like one stays.
    expect(redact('sl.many-profile-refresh-10000-xxxx')).toBe('sl.many-profile-refresh-10000-xxxx');
  });
});

describe('every way out passes through it', () => {
  it('log lines, whatever field or message carries the secret', () => {
    let written = '';
    const destination = new Writable({ write(chunk: Buffer, _enc, done) { written += chunk.toString(); done(); } });
    const log = createLogger({ destination, pretty: false });
    log.warn({ err: new Error(`provider said: ${ECHO}`), detail: ECHO }, `renewal failed: ${ECHO}`);
    log.flush();
    expect(written).toContain('renewal failed');
    expect(leaks(written)).toEqual([]);
  });

  it('OAuth and service errors, and the scrub of provider texts', () => {
    const oauth = new OAuthError('OAUTH_INVALID_CLIENT', `Dropbox refused: ${ECHO}`, { errorDescription: ECHO, hint: ECHO });
    expect(leaks(`${oauth.message} ${oauth.errorDescription} ${oauth.hint}`)).toEqual([]);
    expect(leaks(scrub(ECHO, []))).toEqual([]);
    const service = new ServiceError('SERVICE_UNAUTHORIZED', `refused: ${ECHO}`, { detail: ECHO, hint: ECHO });
    expect(leaks(`${service.message} ${service.detail} ${service.hint}`)).toEqual([]);
  });

  it('what reportError prints, even for an error that is not ours', () => {
    let stderr = '';
    const sink = new Writable({ write(chunk: Buffer, _enc, done) { stderr += chunk.toString(); done(); } });
    reportError({ stdout: sink, stderr: sink }, new Error(ECHO));
    expect(stderr).toMatch(/^error: unexpected failure: /);
    expect(leaks(stderr)).toEqual([]);
  });

  it('every field written to the profile state, lastError included', async () => {
    const profiles = openProfileStore(path.join(tempDir(), 'config'));
    await profiles.update('p', () => ({ connectorName: `dropbox-${APP_KEY}`, lastError: { code: 'OAUTH_INVALID_CLIENT', message: ECHO, at: new Date().toISOString(), terminal: true } }));
    const file = readFileSync(profiles.fileOf('p'), 'utf8');
    expect(file).toContain('"message": "Basic [redacted]');
    expect(leaks(file)).toEqual([]);
  });
});
