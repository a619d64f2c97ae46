import { ValidationError } from '../errors.js';

// The name becomes a file name and part of a keychain account (`<profile>:<secret>`), so it keeps to an
// alphabet that is safe in both and can never collide with the keychain's `__profiles__` index entry.
export const PROFILE_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export function isProfileName(name: string): boolean {
  return PROFILE_NAME_PATTERN.test(name);
}

export function assertProfileName(name: string): void {
  if (typeof name !== 'string' || !isProfileName(name)) {
    throw new ValidationError([
      {
        field: 'profile',
        message: 'must be 1-64 letters, digits, dot, dash or underscore, starting with a letter or digit',
      },
    ]);
  }
}

/** The command that authorizes a profile again (a revoked grant) or corrects its settings: the one fix users are told. */
export function reauthorizeCommand(profile: string): string {
  return `syncauth setup --profile ${profile}`;
}
