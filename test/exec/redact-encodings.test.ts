// The encodings redaction knows, as exec's environment filter relies on them: a registered secret is cut out
// of any text in base64url and in hex of either case, as it already was raw, URL-encoded and in base64.
import { describe, expect, it } from 'vitest';
import { redact, REDACTED, registerSecrets } from '../../src/redact.js';

describe('redaction of encoded secrets', () => {
  it('cuts a registered secret out in base64url, hex and upper-case hex', () => {
    const secret = 'canary~~~secret???value>>x';
    registerSecrets(secret);
    const bytes = Buffer.from(secret);
    for (const form of [bytes.toString('base64url'), bytes.toString('hex'), bytes.toString('hex').toUpperCase()]) {
      expect(form).not.toBe(bytes.toString('base64'));
      expect(redact(`before ${form} after`)).toBe(`before ${REDACTED} after`);
    }
  });
});
