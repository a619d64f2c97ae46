import type { Coordinator, CoordinatorUnavailableError } from '../../src/daemon/coordinator.js';
import type { FleetBackend } from '../../src/daemon/fleet.js';
import type { BudgetState } from '../../src/daemon/call-budget.js';
import type { DaemonGrant } from '../../src/daemon/index.js';
import type { EmulatorApp, RunningEmulator } from '../../src/emulator/index.js';
import type { exchangeCode } from '../../src/oauth/index.js';

/** Redis's keys in memory, on the coordinator's own clock; `down` makes every call fail as an outage does. */
export interface MemoryRedis {
  now(): number;
  leases: Map<string, { owner: string; until: number }>;
  records: Map<string, unknown>;
  /** The fleet's members and their lease ends; made on first use. */
  members?: Map<string, number | 'left'>;
  /** Pauses' ends by Dropbox account; made on first use. */
  pauses?: Map<string, number>;
  /** Budgets of token calls by profile (src/daemon/call-budget.ts), times on `now()`; made on first use. */
  budgets?: Map<string, BudgetState>;
  /** Sealed grant records by profile; made on first use. */
  grants?: Map<string, string>;
  down?: boolean;
}

/** The fleet's membership on `redis.now()`, as the Redis coordinator keeps it. */
export declare function memoryFleet(redis: MemoryRedis, unavailable: typeof CoordinatorUnavailableError): FleetBackend;

/**
 * A coordinator like the Redis one: leases and records kept on `redis.now()`, translated to and from the
 * replica's clock `replicaNow`. While `redis.down`, every call throws `CoordinatorUnavailableError`.
 */
export declare function memoryCoordinator(
  redis: MemoryRedis,
  replicaId: string,
  unavailable: typeof CoordinatorUnavailableError,
  replicaNow: () => number,
  leaseMs?: number,
): Coordinator;

/** A grant of `app` on the emulator, through its authorize page (auto-approved) and the code exchange. */
export declare function obtainGrant(emu: RunningEmulator, app: EmulatorApp, exchange: typeof exchangeCode): Promise<DaemonGrant>;
