// The sinks a `syncauth daemon` run will write, each locked before anything is published, adopted or rendered
// (see src/publish/sink-lock.ts): a sink held by another running process refuses the start with exit 2,
// naming that process, and nothing of it is touched.
import { createServer } from 'node:http';
import { ValidationError, type FieldIssue } from '../errors.js';
import { listenHttp } from '../net/listen.js';
import { tokenFileFor } from '../publish/place.js';
import { SinkLocks, type SinkRequestForLock } from '../publish/sink-lock.js';
import type { TemplateSpec } from '../publish/template.js';
import type { ProfileSinks } from '../publish/token-file.js';

export interface DaemonSinks {
  names: readonly string[];
  /** Where the daemon-wide token file puts a profile without its own; undefined when none. */
  sharedTokenFile: (name: string) => string | undefined;
  tokenFileField: string;
  templates: readonly TemplateSpec[];
  profileSinks: ReadonlyMap<string, ProfileSinks>;
  socket?: { path: string; field: string };
}

/** Every sink of the run, each path once, with the setting that named it. */
export function sinksOf(sinks: DaemonSinks): SinkRequestForLock[] {
  const requests = new Map<string, string>();
  const add = (path: string | undefined, field: string): void => {
    if (path !== undefined && !requests.has(path)) requests.set(path, field);
  };
  for (const name of sinks.names) {
    const own = sinks.profileSinks.get(name);
    add(own?.tokenFile ?? sinks.sharedTokenFile(name), own?.tokenFile !== undefined ? `profiles.${name}.sinks.token_file` : sinks.tokenFileField);
    for (const spec of sinks.templates) add(tokenFileFor(spec.dest, name), '--template');
    for (const spec of own?.templates ?? []) add(spec.dest, `profiles.${name}.sinks.templates`);
  }
  if (sinks.socket) add(sinks.socket.path, sinks.socket.field);
  return [...requests].map(([path, field]) => ({ path, field }));
}

/** Takes the lock of every sink of the run, or refuses (a ValidationError, exit 2) naming the sinks held elsewhere. */
export async function lockDaemonSinks(sinks: DaemonSinks): Promise<SinkLocks> {
  const locks = new SinkLocks();
  await locks.take(sinksOf(sinks));
  return locks;
}

/**
 * Whether each address can be listened on now: bound and let go at once, so that a port in use refuses the
 * start (exit 2) before anything is sent (a notice waiting in the outbox) or published. The daemon binds each
 * again moments later; a program that takes the port in between is refused then.
 */
export async function checkPortsFree(addresses: readonly { listen: { host: string; port: number } | undefined; field: string }[]): Promise<void> {
  const issues: FieldIssue[] = [];
  for (const { listen, field } of addresses) {
    if (!listen || listen.port === 0) continue;
    try {
      const bound = await listenHttp(createServer(), listen, field);
      await bound.close();
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      issues.push(...error.issues);
    }
  }
  if (issues.length > 0) throw new ValidationError(issues);
}
