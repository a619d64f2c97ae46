import { describe, expect, it } from 'vitest';
import {
  SCOPES_FOR_ACCESS,
  checkAccessTokenShape,
  checkGrantedScopes,
  looksLikeAccessToken,
} from '../../src/oauth/index.js';

describe('SCOPES_FOR_ACCESS', () => {
  it('maps each access mode to its content permissions', () => {
    expect(SCOPES_FOR_ACCESS).toEqual({
      read: ['files.content.read'],
      write: ['files.content.write'],
      'read-write': ['files.content.read', 'files.content.write'],
    });
  });

  it('cannot be changed by a caller', () => {
    expect(() => SCOPES_FOR_ACCESS.read.push('x')).toThrow(TypeError);
  });
});

describe('checkGrantedScopes', () => {
  const granted = ['account_info.read', 'files.content.read', 'files.metadata.read'];

  it('finds nothing missing when the mode is covered', () => {
    expect(checkGrantedScopes(granted, 'read')).toEqual({ missing: [] });
  });

  it('names what is missing, where to tick it and that the app must be authorized again', () => {
    const result = checkGrantedScopes(granted, 'read-write');
    expect(result.missing).toEqual(['files.content.write']);
    expect(result.message).toContain('files.content.write');
    expect(result.message).toContain('Permissions tab');
    expect(result.message).toContain('authorize again');
    expect(checkGrantedScopes([], 'write').missing).toEqual(['files.content.write']);
    expect(checkGrantedScopes([], 'read-write').missing).toEqual(['files.content.read', 'files.content.write']);
  });
});

describe('token shape', () => {
  it('recognises a pasted short-lived access token', () => {
    expect(looksLikeAccessToken('  sl.u.AbX9y6Fe3AuH5o66\n')).toBe(true);
    expect(looksLikeAccessToken('bTCiUTzxe6kAAAAAAAAAGN1NMZIxyqETKr4o7OS2dU8')).toBe(false);
  });

  it('warns about an access token without the sl. prefix and never quotes it', () => {
    expect(checkAccessTokenShape('sl.B2M8yVLTS_ojO3UsFs2t')).toBeUndefined();
    const warning = checkAccessTokenShape('SECRET-looking-token');
    expect(warning).toContain('"sl."');
    expect(warning).not.toContain('SECRET-looking-token');
  });
});
