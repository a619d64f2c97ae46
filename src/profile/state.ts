// The non-secret state of one profile, as stored in `<configDir>/profiles/<name>.json`.
import * as z from 'zod';
import { PROFILE_NAME_PATTERN } from './name.js';

const isoTime = z.iso.datetime({ offset: true });

export const LastErrorSchema = z.strictObject({
  code: z.string().min(1),
  message: z.string(),
  at: isoTime,
  /** The failure needs the user (re-authorization, configuration); retrying alone will not fix it. */
  terminal: z.boolean(),
});

// Strict on purpose, on write and on read: a key the schema does not know is refused, so a secret handed to
// update() by mistake (`refresh_token`, `app_secret`, an access token) can never reach this plaintext file.
// The price is that a file written by a newer syncauth with extra fields reads as corrupt here; such a change
// would bump `version` anyway.
//
// No field holds any part of the app key: it is treated as a secret like the others, and a hint such as its
// last characters would help nobody who does not already have the keychain entry.
//
// Version 2 adds `accountId`. A file is written as version 2 only when it holds one (see `stateVersionOf`), so
// a profile that never recorded an account stays readable by the previous release, and one that did is refused
// there as a newer format rather than half read. Both versions are read here.
export const ProfileStateSchema = z.strictObject({
  version: z.union([z.literal(1), z.literal(2)]),
  profile: z.string().regex(PROFILE_NAME_PATTERN),
  baseUrl: z.string().min(1).optional(),
  apiKeyHeader: z.string().min(1).optional(),
  remoteUrl: z.string().min(1).optional(),
  recursive: z.boolean().optional(),
  access: z.enum(['read', 'write', 'read-write']).optional(),
  connectorId: z.string().min(1).optional(),
  connectorName: z.string().min(1).optional(),
  workflowId: z.string().min(1).optional(),
  schedule: z.string().min(1).optional(),
  authorizeUrl: z.string().min(1).optional(),
  tokenUrl: z.string().min(1).optional(),
  dropboxApiUrl: z.string().min(1).optional(),
  redirectUri: z.string().min(1).optional(),
  /**
   * The Dropbox account that granted access (`account_id`, e.g. `dbid:AA…`): setup records it, the daemon learns
   * it while the grant works, and re-authorization accepts only a grant of the same account. An id, not a secret.
   */
  accountId: z.string().min(1).max(200).optional(),
  /** When the access token last issued expires; the token itself is a secret and is not kept here. */
  accessTokenExpiresAt: isoTime.optional(),
  lastRenewalAt: isoTime.optional(),
  lastError: LastErrorSchema.optional(),
  needsReauthorization: z.boolean().optional(),
  /**
   * A random marker replaced whenever the stored secrets are written (see `newSecretsVersion`). It is not
   * derived from the secrets, so it reveals nothing; a daemon that parked a profile as terminal compares it to
   * know the user has since stored new secrets and the profile is worth another try.
   */
  secretsVersion: z.string().min(1).optional(),
  createdAt: isoTime,
  updatedAt: isoTime,
});

export type ProfileState = z.infer<typeof ProfileStateSchema>;
export type ProfileLastError = z.infer<typeof LastErrorSchema>;

/**
 * What an update returns: a whole state, where the bookkeeping fields may be left out because the store fills
 * them in (`version`, `profile`, `createdAt` kept from the stored state, `updatedAt` set to now).
 */
export type ProfileStateDraft = Omit<ProfileState, 'version' | 'profile' | 'createdAt' | 'updatedAt'> &
  Partial<Pick<ProfileState, 'version' | 'profile' | 'createdAt' | 'updatedAt'>>;

/** The version a state is written as: 2 when it holds a field version 1 does not know, else 1. */
export function stateVersionOf(state: { accountId?: string | undefined }): 1 | 2 {
  return state.accountId !== undefined ? 2 : 1;
}
