// `--once`: one sweep of a started daemon, judged. Its exit code tells a script whether every profile is fresh.
import { ExitCode, SyncauthError } from '../errors.js';
import type { Logger } from '../log.js';
import { reauthorizeCommand } from '../profile/name.js';
import type { RunningDaemon } from './types.js';

/**
 * One sweep (renew what is due, reconcile, publish), then a clean close that leaves published tokens in place
 * for the consumers. Resolves only when every profile holds a fresh token and its reconcile did not fail;
 * otherwise one line per failed profile on `stderr`, and throws (exit 4 when one needs re-authorization, else 1).
 * A stop signal during the pass closes the daemon, gives back the sinks and exits 130 (SIGINT) or 143.
 */
export async function onePass(running: RunningDaemon, log: Logger, stderr: { write(text: string): unknown }, releaseSinks: () => Promise<void> | undefined): Promise<void> {
  const stop = (signal: NodeJS.Signals): void => {
    log.warn({ event: 'daemon.stopping', op: 'stop', signal }, 'stopping the one pass');
    void running
      .close()
      .then(() => releaseSinks())
      .catch(() => undefined)
      .finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  const report = await running.sweep();
  // Templates render beside the renewals; the pass is judged once they have ended.
  await running.rendersSettled();
  const status = running.status();
  await running.close();
  process.off('SIGTERM', stop);
  process.off('SIGINT', stop);
  const entries = new Map(report.profiles.map((entry) => [entry.profile, entry]));
  const failed: { name: string; why: string; reauthorize: boolean }[] = [];
  for (const profile of status.profiles) {
    const entry = entries.get(profile.name);
    const reauthorize = profile.terminal?.reason === 'reauthorization_needed';
    if (!profile.ready) failed.push({ name: profile.name, why: profile.reason ?? 'not fresh', reauthorize });
    else if (entry?.reconcile === 'failed') failed.push({ name: profile.name, why: 'the token is fresh, but updating the connector with it failed (see the log)', reauthorize });
    else if (entry?.reconcile === 'deferred' && status.coordinator?.available === false) {
      failed.push({ name: profile.name, why: 'the token is fresh, but the connector was not updated: Redis (--redis-url) is unreachable', reauthorize });
    }
  }
  for (const { name, why } of failed) stderr.write(`syncauth daemon --once: profile "${name}": ${why}\n`);
  const fresh = status.profiles.length - failed.length;
  log.info({ event: 'daemon.once', op: 'stop', fresh, failed: failed.map((f) => f.name) }, `one pass done: ${fresh} of ${status.profiles.length} profiles fresh`);
  if (failed.length === 0) return;
  const reauthorize = failed.filter((f) => f.reauthorize).map((f) => f.name);
  throw new SyncauthError('SYNCAUTH_NOT_FRESH', `${failed.length} of ${status.profiles.length} profiles are not fresh: ${failed.map((f) => f.name).join(', ')}`, {
    exitCode: reauthorize.length > 0 ? ExitCode.authRequired : ExitCode.error,
    ...(reauthorize.length > 0 ? { hint: `run ${reauthorize.map((name) => `\`${reauthorizeCommand(name)}\``).join(', ')} to authorize again` } : {}),
  });
}
