// A test seam for the moments no signal handler sees: `kill -9` between two writes. When SYNCAUTH_FAILPOINT
// names a point (a comma-separated list), the process stops there: it says so on stderr, then waits until it is
// killed, or until Ctrl-C/SIGTERM, after which it goes on so that a write section still finishes whole. Unset,
// as in any real use, a failpoint costs one string comparison.
import { interruptSignal } from './interrupt.js';

export async function failpoint(name: string, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const wanted = env.SYNCAUTH_FAILPOINT;
  if (!wanted || !wanted.split(',').includes(name)) return;
  process.stderr.write(`syncauth: failpoint ${name} reached\n`);
  if (interruptSignal.aborted) return;
  await new Promise<void>((resolve) => {
    // Keeps the event loop alive while held.
    const timer = setInterval(() => undefined, 60_000);
    interruptSignal.addEventListener('abort', () => {
      clearInterval(timer);
      resolve();
    }, { once: true });
  });
}
