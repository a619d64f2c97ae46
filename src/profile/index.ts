export { openProfileStore, newSecretsVersion } from './store.js';
export type { ProfileStore, ProfileStoreOptions, UpdateOptions } from './store.js';
export { ProfileStateSchema, LastErrorSchema } from './state.js';
export type { ProfileState, ProfileStateDraft, ProfileLastError } from './state.js';
export { ProfileStoreError, isProfileStoreError, PROFILE_STORE_ERROR_CODES } from './errors.js';
export type { ProfileStoreErrorCode } from './errors.js';
export { PROFILE_NAME_PATTERN, isProfileName, assertProfileName } from './name.js';
