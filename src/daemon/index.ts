// The sidecar's core: one process serving many profiles. A sweep (node-cron, or a caller) finds tokens inside
// the renewal margin and renews each under the profile's locks (a replica lease when coordinated, the profile
// store's lock across processes, single flight within this one), re-reading what others recorded first. After
// each renewal the token is published and the connector reconciled. Everything comes in as options, the clock
// included, so a test can live through many token lifetimes in a second.
//
// The parts: config.ts resolves the options once; worker.ts is one profile's visits, with its renewal in
// renewal.ts and its reconciles in reconciler.ts; daemon.ts owns the workers, the sweep, the schedule, the
// servers and their closing.
import { Daemon } from './daemon.js';
import type { DaemonOptions, RunningDaemon } from './types.js';

export type * from './types.js';
export type { Coordinator, Lease, SharedReconcile } from './coordinator.js';
export { CoordinatorUnavailableError, isCoordinatorUnavailable } from './coordinator.js';
export { createRedisCoordinator, checkRedisUrl, redisTarget } from './redis.js';
export type { RedisCoordinator, RedisCoordinatorOptions } from './redis.js';
export { checkSchedule } from './cron.js';
export { reauthorizeCommand } from '../profile/name.js';
export { checkTokenFileTemplate } from '../publish/token-file.js';
export { tokenFileFor, PROFILE_PLACEHOLDER } from '../publish/place.js';
export { DEFAULT_CHECK_INTERVAL_MS, DEFAULT_CONCURRENCY, DEFAULT_MAX_CHECKS_PER_SECOND, DEFAULT_SCHEDULE, noticeWithinMs, resolveDaemonConfig, type DaemonConfig } from './config.js';
export { isLoadFailure } from './worker.js';
export { parseCheckInterval, parseChecksPerSecond } from './token-check.js';
export { Daemon } from './daemon.js';

/** Checks the options, loads the profiles, opens what they ask for and starts sweeping. */
export async function startDaemon(options: DaemonOptions): Promise<RunningDaemon> {
  return new Daemon(options).start();
}
