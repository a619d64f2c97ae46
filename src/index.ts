// The library surface of syncauth for Node users: the typed client of the ingestion service, its models and
// the per-type config validation that the CLI uses.
export * from './service/index.js';
export { ExitCode, SyncauthError, ValidationError } from './errors.js';
export type { FieldIssue } from './errors.js';
