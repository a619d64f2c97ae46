// The sinks a `syncauth daemon` run will write, each locked before anything is published, adopted or rendered
// (see src/publish/sink-lock.ts): a sink held by another running process refuses the start with exit 2,
// naming that process, and nothing of it is touched.
import { createServer } from 'node:http';
import { absorbing, ValidationError, type FieldIssue } from '../errors.js';
import { listenHttp } from '../net/listen.js';
import path from 'node:path';
import type { DaemonFileConfig } from './config-file.js';
import { insidePrivateSubdir, sharedBecause, tokenFileFor } from '../publish/place.js';
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
    await absorbing(issues, async () => {
      const bound = await listenHttp(createServer(), listen, field);
      await bound.close();
    });
  }
  if (issues.length > 0) throw new ValidationError(issues);
}

/**
 * Before anything of the start is made (a private subdirectory, a port bound): the sinks the run would take,
 * where it would place them, that another live process holds. A second daemon over the same sinks is refused
 * naming the first, rather than for the port the first listens on. Looks only; the locks are taken later.
 */
export async function refuseHeldSinks(
  sinks: Omit<DaemonSinks, 'profileSinks' | 'sharedTokenFile'> & { tokenFile: string | undefined; config: DaemonFileConfig | undefined },
): Promise<void> {
  const placed = async (file: string): Promise<string> => ((await sharedBecause(path.dirname(file))) === undefined ? file : insidePrivateSubdir(file));
  const own = new Map<string, { tokenFile?: string; templates?: TemplateSpec[] }>();
  for (const name of sinks.names) {
    const raw = sinks.config?.profileSinks[name];
    if (!raw) continue;
    own.set(name, {
      ...(raw.token_file ? { tokenFile: await placed(tokenFileFor(raw.token_file.path, name)) } : {}),
      templates: await Promise.all((raw.templates ?? []).map(async (t) => ({ source: t.source, dest: await placed(tokenFileFor(t.dest, name)), mode: 0o600 }))),
    });
  }
  const shared = new Map<string, string>();
  if (sinks.tokenFile !== undefined) for (const name of sinks.names) if (!own.get(name)?.tokenFile) shared.set(name, await placed(tokenFileFor(sinks.tokenFile, name)));
  const templates: TemplateSpec[] = [];
  for (const spec of sinks.templates) for (const name of sinks.names) templates.push({ ...spec, dest: await placed(tokenFileFor(spec.dest, name)) });
  const requests = sinksOf({
    ...sinks,
    templates,
    profileSinks: own,
    sharedTokenFile: (name) => shared.get(name),
    ...(sinks.socket ? { socket: { ...sinks.socket, path: await placed(sinks.socket.path) } } : {}),
  });
  const issues = await new SinkLocks().heldElsewhere(requests);
  if (issues.length > 0) throw new ValidationError(issues);
}
