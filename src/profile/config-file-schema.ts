// The schema of `<configDir>/config.json` (config-file.ts), apart so that it and zod are loaded only when a
// config file is read: every command loads config-file.ts, most find no file, and zod is the largest part of
// the CLI to load.
import * as z from 'zod';
import { PROFILE_NAME_PATTERN } from './name.js';

// Strict like the state file: it is plaintext, so a key it does not know (a secret passed by mistake) is refused.
export function configFileSchema<Version extends number>(version: Version) {
  return z.strictObject({
    version: z.literal(version),
    profiles: z.record(z.string().regex(PROFILE_NAME_PATTERN), z.strictObject({ store: z.enum(['keychain', 'file', 'env']).optional() })),
  });
}
