export declare const DEFAULT_REDIS_SERVER: string;

/** `redis-server` on PATH, else /usr/bin/redis-server, else null. */
export declare function findRedisServer(env?: NodeJS.ProcessEnv): string | null;

/** Whether a PING on `port` answers PONG within half a second. */
export declare function pong(port: number): Promise<boolean>;

export { freePort } from './ports.mjs';

export interface RedisProcess {
  port: number;
  /** `redis://127.0.0.1:PORT` */
  url: string;
  /** Whether a server process is running now. */
  readonly running: boolean;
  /** SIGKILL: the outage a crashed or unreachable Redis causes. Resolves once the process is gone. */
  kill(): Promise<void>;
  /** Starts the server again on the same port, once killed. */
  start(): Promise<void>;
  /** kill() then start(): empty, since nothing was persisted. */
  restart(): Promise<void>;
  /** Stops it for good and removes its directory. */
  stop(): Promise<void>;
}

/** Starts `executable` (a redis-server) on a free loopback port and resolves once it answers PING. */
export declare function startRedisProcess(executable: string, options?: { startTimeoutMs?: number }): Promise<RedisProcess>;
