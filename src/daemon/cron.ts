// The sweep's schedule. node-cron only decides when; the work is sweep(). node-cron's own messages (which it
// would print to the console in colour) go through pino.
import { createTask, validate, type Logger as CronLogger, type ScheduledTask } from 'node-cron';
import { ValidationError } from '../errors.js';
import type { Logger } from '../log.js';

export function checkSchedule(expression: string, field = 'schedule'): void {
  if (!validate(expression)) {
    throw new ValidationError([{ field, message: 'is not a valid cron expression (5 fields, or 6 with seconds first), e.g. "* * * * *"' }]);
  }
}

export function cronLogger(log: Logger): CronLogger {
  const message = (value: string | Error): string => (value instanceof Error ? value.message : value);
  return {
    info: (text) => log.info({ event: 'schedule.note', op: 'sweep' }, message(text)),
    warn: (text) => log.warn({ event: 'schedule.warning', op: 'sweep' }, message(text)),
    error: (text, err) => log.error({ event: 'schedule.error', op: 'sweep', error: err?.message }, message(text)),
    debug: (text, err) => log.debug({ event: 'schedule.note', op: 'sweep', error: err?.message }, message(text)),
  };
}

export interface SweepSchedule {
  stop(): Promise<void>;
}

/** What the schedule tells the daemon when time did not pass as the timers expected. */
export interface ClockJump {
  /** Wall-clock time that passed beyond what the monotonic clock saw (negative: the wall clock stepped back). */
  wallStepMs: number;
  /** How late the heartbeat ran on the monotonic clock (the process was stopped, or the host suspended). */
  pausedMs: number;
}

export interface ScheduleOptions {
  clock: { wall(): number; mono(): number };
  /** Called once per jump, after the cron task was re-armed; the daemon renews what is due before anything else. */
  onJump: (jump: ClockJump) => void;
  /** How often the clocks are compared. Default 1 s. */
  heartbeatMs?: number;
  /** A difference smaller than this is timer noise, not a jump. Default 5 s. */
  toleranceMs?: number;
}

/**
 * Runs `sweep` on the cron schedule without ever waiting for it: a tick starts a sweep whether or not the
 * previous one has finished (each profile runs one cycle at a time by itself, so a slow profile delays only
 * itself). node-cron plans its next tick by the wall clock, so a wall clock stepped back would silence it until
 * the clock catches up, and one that jumped forward would make it report every tick it missed. A heartbeat on
 * the monotonic clock notices both, and a stop or a suspend too: it re-arms the task and reports the jump
 * once, and node-cron's per-tick warnings are left unsaid.
 */
export function scheduleSweeps(expression: string, sweep: () => Promise<unknown>, log: Logger, options: ScheduleOptions): SweepSchedule {
  const heartbeatMs = options.heartbeatMs ?? 1_000;
  const toleranceMs = options.toleranceMs ?? 5_000;
  const cronLog = cronLogger(log.child({ component: 'cron' }));
  const start = (): ScheduledTask => {
    const created = createTask(expression, () => void sweep().catch((error: unknown) => log.error({ event: 'sweep.failed', op: 'sweep', err: error }, 'a sweep failed')), {
      name: 'syncauth-sweep',
      logger: cronLog,
      suppressMissedWarning: true,
    });
    void created.start();
    return created;
  };
  let task = start();
  let lastWall = options.clock.wall();
  let lastMono = options.clock.mono();
  const heartbeat = setInterval(() => {
    const wall = options.clock.wall();
    const mono = options.clock.mono();
    const wallStepMs = wall - lastWall - (mono - lastMono);
    const pausedMs = mono - lastMono - heartbeatMs;
    lastWall = wall;
    lastMono = mono;
    if (Math.abs(wallStepMs) < toleranceMs && pausedMs < toleranceMs) return;
    void task.destroy();
    task = start();
    options.onJump({ wallStepMs, pausedMs: Math.max(0, pausedMs) });
  }, heartbeatMs);
  heartbeat.unref();
  return {
    async stop() {
      clearInterval(heartbeat);
      await task.destroy();
    },
  };
}
