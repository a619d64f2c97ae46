// The sweep's schedule. node-cron only decides when; the work is sweep(). noOverlap skips a tick while the
// previous sweep still runs, and node-cron's own messages (which it would print to the console in colour)
// go through pino.
import { createTask, validate, type Logger as CronLogger } from 'node-cron';
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
    info: (text) => log.info(text),
    warn: (text) => log.warn(text),
    error: (text, err) => log.error({ error: err?.message }, message(text)),
    debug: (text, err) => log.debug({ error: err?.message }, message(text)),
  };
}

export interface SweepSchedule {
  stop(): Promise<void>;
}

export function scheduleSweeps(expression: string, sweep: () => Promise<unknown>, log: Logger): SweepSchedule {
  const task = createTask(expression, () => sweep(), {
    name: 'syncauth-sweep',
    noOverlap: true,
    logger: cronLogger(log.child({ component: 'cron' })),
  });
  void task.start();
  return {
    async stop() {
      await task.destroy();
    },
  };
}
