// The access token kept in a profile's secrets carries its format's version; an entry the previous release
// wrote (the same fields, no version) is still read, and one of a later format is left alone (renewed over).
import { describe, expect, it } from 'vitest';
import { decodeAccessToken, encodeAccessToken } from '../../src/sync/token-cache.js';

const grant = { appKey: 'app-key-of-the-test', refreshToken: 'refresh-token-of-the-test' };
const token = { accessToken: 'sl.kept-access-token', expiresAt: 1_900_000_000_000, renewedAt: 1_899_990_000_000 };

describe('the kept access token', () => {
  it('is written with its version and read back', () => {
    const stored = encodeAccessToken(token, grant);
    expect(JSON.parse(stored)).toMatchObject({ v: 1 });
    expect(decodeAccessToken(stored, grant)).toEqual(token);
  });

  it('as the previous release wrote it (no version) is still read', () => {
    const previous = JSON.parse(encodeAccessToken(token, grant)) as Record<string, unknown>;
    delete previous.v;
    expect(decodeAccessToken(JSON.stringify(previous), grant)).toEqual(token);
  });

  it('of a later format, or of another grant, is not taken', () => {
    const later = { ...(JSON.parse(encodeAccessToken(token, grant)) as Record<string, unknown>), v: 2 };
    expect(decodeAccessToken(JSON.stringify(later), grant)).toBeUndefined();
    expect(decodeAccessToken(encodeAccessToken(token, grant), { ...grant, refreshToken: 'another-refresh-token' })).toBeUndefined();
  });
});
