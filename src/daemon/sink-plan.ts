// The sinks of a `syncauth daemon` run planned as one step, before anything starts: each kind's settings
// checked (every bad one named at once), a sink another running process holds refused, then a port in use, and
// only then each sink placed (a directory other users may write gets the daemon's own subdirectory, see
// src/publish/place.ts), a profile's own sinks of the configuration file likewise, and the socket's path
// checked. A refusal at any step is exit 2 with nothing made; the plan's `lock` takes the locks of every sink
// (src/daemon/sinks.ts) when the sidecar starts its parts.
import type { Settings } from '../config.js';
import { absorbing, ValidationError, type FieldIssue } from '../errors.js';
import type { Logger } from '../log.js';
import { PRIVATE_ACCESS, parseMode, resolveGroup, type FileAccess } from '../publish/file.js';
import { placeSinks, PLACE_RULE, tokenFileFor, type SinkRequest } from '../publish/place.js';
import { SocketSink, TemplateSink, TokenFileSink, type Sink } from '../publish/sink.js';
import type { SinkLocks } from '../publish/sink-lock.js';
import { checkSocketPath, socketSpecOf } from '../publish/socket.js';
import { checkTemplate, parseTemplateFlag, type TemplateSpec } from '../publish/template.js';
import { checkTokenFilePlaces, tokenFileAccessOf, type ProfileSinks } from '../publish/token-file.js';
import type { DaemonFileConfig } from './config-file.js';
import { checkPortsFree, lockDaemonSinks, refuseHeldSinks } from './sinks.js';

/** How each sink setting is named in messages: as the person gave it (a flag, a variable, the file's key). */
export interface SinkFields {
  /** The token file as the sinks are named (its flag, variable or key). */
  tokenFile: string;
  /** The token file's path as its access check names it. */
  tokenFilePath: string;
  tokenFileMode: string;
  tokenFileGroup: string;
  socket: string;
  /** The socket's path as its spec's check names it. */
  socketPath: string;
}

/** The daemon-wide sink settings, checked by their own kinds here, and what the plan needs besides. */
export interface SinkPlanInput {
  /** The profiles served. */
  names: readonly string[];
  settings: Pick<Settings, 'tokenFile' | 'tokenFileMode' | 'tokenFileGroup' | 'socket'>;
  /** Each `--template SRC:DEST[:MODE]` as given. */
  templates: readonly string[];
  socketMode: string | undefined;
  socketGroup: string | undefined;
  /** One pass (--once) serves no socket and listens on nothing. */
  once: boolean;
  /** The addresses the run will listen on, refused when in use before anything is placed. */
  listen: readonly { listen: { host: string; port: number } | undefined; field: string }[];
  /** The configuration file, with the profiles' own sinks; undefined without one. */
  config: DaemonFileConfig | undefined;
  fields: SinkFields;
  log: Logger;
}

/** Every sink of the run, checked and placed; `lock` takes them for this run. */
export interface SinkPlan {
  /** The daemon-wide token file as it will be written (placed); `{profile}` still in it. */
  tokenFile?: string;
  tokenFileAccess?: FileAccess;
  /** The daemon-wide templates, placed. */
  templates: TemplateSpec[];
  /** The profiles' own sinks (the file's profiles.NAME.sinks), placed. */
  profileSinks: Map<string, ProfileSinks>;
  /** The socket, placed; undefined with --once. */
  socket?: { path: string; mode?: number; gid?: number };
  /** Where the daemon-wide token file puts a profile (its own token file aside); undefined without one. */
  sharedTokenFile(name: string): string | undefined;
  /** Takes the lock of every sink, or refuses (exit 2) naming those another running process holds. */
  lock(): Promise<SinkLocks>;
}

/** How the token is handed to consumers besides the token file's path: checked before anything starts. */
interface Handover {
  tokenFileAccess?: FileAccess;
  templates: TemplateSpec[];
  socket?: { path: string; mode?: number; gid?: number };
}

/** Each sink kind checks its own settings (see src/publish/); every bad one is named at once. */
async function checkHandover(input: SinkPlanInput): Promise<Handover> {
  const { settings: v, fields } = input;
  const issues: FieldIssue[] = [];
  const tokenFileAccess = await absorbing(issues, () =>
    tokenFileAccessOf({ path: v.tokenFile, mode: v.tokenFileMode, group: v.tokenFileGroup, fields: { path: fields.tokenFilePath, mode: fields.tokenFileMode, group: fields.tokenFileGroup } }),
  );
  const templates: TemplateSpec[] = [];
  for (const raw of input.templates) {
    const spec = await absorbing(issues, () => parseTemplateFlag(raw, '--template'));
    if (!spec) continue;
    await absorbing(issues, () => checkTemplate(spec, input.names, '--template'));
    templates.push(spec);
  }
  const socket = await absorbing(issues, () => socketSpecOf({ path: v.socket, mode: input.socketMode, group: input.socketGroup, pathField: fields.socketPath }));
  if (issues.length > 0) throw new ValidationError(issues);
  return { ...(tokenFileAccess ? { tokenFileAccess } : {}), templates, ...(socket ? { socket } : {}) };
}

/**
 * Every sink whose directory other users may write moves into the daemon's own subdirectory there (see
 * src/publish/place.ts); one that cannot (that subdirectory is someone else's, or a link) is refused with exit 2.
 * Returns the token file's path as it will be written, and updates the handover's paths.
 */
async function placeHandover(input: SinkPlanInput, handover: Handover): Promise<string | undefined> {
  const { log, fields, names } = input;
  const tokenFile = input.settings.tokenFile;
  // One pass serves no socket, so makes no place for it.
  const socket = input.once ? undefined : handover.socket;
  const sinks: Sink[] = [
    ...(tokenFile ? [new TokenFileSink(tokenFile, fields.tokenFile, handover.tokenFileAccess)] : []),
    ...handover.templates.map((spec) => new TemplateSink(spec, '--template', log)),
    ...(socket ? [new SocketSink(socket.path, fields.socket, socket)] : []),
  ];
  const placed = await placeSinks(sinks.map((sink) => sink.placement()), (template) => [...new Set(names.map((name) => tokenFileFor(template, name)))]);
  const at = sinks.map((sink, i) => {
    const { path: where, movedBecause } = placed[i] as { path: string; movedBecause?: string };
    if (movedBecause !== undefined) {
      log.info(
        { event: 'sink.moved', op: 'start', field: sink.field, configured: sink.path, path: where, reason: movedBecause },
        `${sink.field}: ${movedBecause}, so ${sink.path} is published as ${where} (${PLACE_RULE})`,
      );
    }
    return sink.placedAt(where);
  });
  handover.templates = at.flatMap((sink) => (sink instanceof TemplateSink ? [sink.spec] : []));
  if (socket) socket.path = (at.find((sink) => sink.kind === 'socket') as Sink).path;
  return at.find((sink) => sink.kind === 'token file')?.path;
}

/**
 * The sinks of the run, in this order (a refusal at each step is exit 2, and nothing of a later one is made):
 * the daemon-wide token file's places (of the profiles without their own), every sink kind's settings, a sink
 * another running process holds, a port in use, the daemon-wide sinks placed, the profiles' own sinks checked
 * and placed, the socket's path.
 */
export async function planDaemonSinks(input: SinkPlanInput): Promise<SinkPlan> {
  const { names, config, once, fields, log } = input;
  const v = input.settings;
  // A profile's own token file (the configuration file's profiles.NAME.sinks) replaces the daemon-wide one for it.
  const ownTokenFile = (name: string) => config?.profileSinks[name]?.token_file !== undefined;
  if (v.tokenFile) await checkTokenFilePlaces(v.tokenFile, names.filter((name) => !ownTokenFile(name)), fields.tokenFile);
  const handover = await checkHandover(input);
  const socketField = (socket: { path: string } | undefined) => (socket && !once ? { socket: { path: socket.path, field: fields.socket } } : {});
  // A sink another running process holds, then a port in use, refuse the start before a sink's private
  // subdirectory is made (placeHandover).
  await refuseHeldSinks({ names, tokenFile: v.tokenFile, tokenFileField: fields.tokenFile, templates: handover.templates, config, ...socketField(handover.socket) });
  if (!once) await checkPortsFree(input.listen);
  const tokenFile = await placeHandover(input, handover);
  const sharedTokenFile = (name: string) => (tokenFile ? tokenFileFor(tokenFile, name) : undefined);
  const profileSinks = await prepareProfileSinks(config, names, log, sharedTokenFile);
  // The socket's path, then the sinks' locks: a refusal before any of them has made nothing.
  const socket = once ? undefined : handover.socket;
  if (socket) await checkSocketPath(socket.path);
  return {
    ...(tokenFile ? { tokenFile } : {}),
    ...(handover.tokenFileAccess ? { tokenFileAccess: handover.tokenFileAccess } : {}),
    templates: handover.templates,
    profileSinks,
    ...(socket ? { socket } : {}),
    sharedTokenFile,
    lock: () =>
      lockDaemonSinks({
        names,
        sharedTokenFile: (name) => (ownTokenFile(name) ? undefined : sharedTokenFile(name)),
        tokenFileField: fields.tokenFile,
        templates: handover.templates,
        profileSinks,
        ...socketField(socket),
      }),
  };
}

/**
 * The own sinks of the profiles served (`names`), checked and placed as the daemon-wide ones are: the token
 * file's directory must exist, a template must render, and a sink in a directory other users may write moves
 * into the daemon's own subdirectory there, or is refused (see src/publish/place.ts). `shared(name)` is where
 * the daemon-wide token file puts a profile without its own, which no own token file may take. Throws one
 * ValidationError naming every problem by its line and key.
 */
export async function prepareProfileSinks(
  config: DaemonFileConfig | undefined,
  names: readonly string[],
  log: Logger,
  shared: (name: string) => string | undefined,
): Promise<Map<string, ProfileSinks>> {
  const result = new Map<string, ProfileSinks>();
  if (!config) return result;
  const issues: FieldIssue[] = [];
  const requests: (SinkRequest & { name: string; template?: number })[] = [];
  const claimed = new Map<string, string>();
  for (const name of names) if (!config.profileSinks[name]?.token_file) {
    const file = shared(name);
    if (file !== undefined) claimed.set(file, `the token file of profile "${name}"`);
  }
  for (const name of names) {
    const own = config.profileSinks[name];
    if (!own) continue;
    const at = (...rest: (string | number)[]) => config.where(['profiles', name, 'sinks', ...rest]);
    const sinks: ProfileSinks = {};
    if (own.token_file) {
      const field = at('token_file', 'path');
      const file = tokenFileFor(own.token_file.path, name);
      const mode = own.token_file.mode === undefined ? PRIVATE_ACCESS.mode : await absorbing(issues, () => parseMode(own.token_file?.mode as string, at('token_file', 'mode')));
      const gid = own.token_file.group === undefined ? undefined : await absorbing(issues, () => resolveGroup(own.token_file?.group as string, at('token_file', 'group')));
      await absorbing(issues, () => checkTokenFilePlaces(file, [name], field));
      const taken = claimed.get(file);
      if (taken) issues.push({ field, message: `${file} is already ${taken}` });
      claimed.set(file, `the token file of profile "${name}"`);
      sinks.tokenFile = file;
      sinks.tokenFileAccess = { mode: mode ?? PRIVATE_ACCESS.mode, ...(gid !== undefined ? { gid } : {}) };
      requests.push({ name, path: file, field, ...(gid !== undefined ? { gid } : {}) });
    }
    const templates: TemplateSpec[] = [];
    for (const [i, t] of (own.templates ?? []).entries()) {
      const field = at('templates', i);
      const spec: TemplateSpec = { source: t.source, dest: tokenFileFor(t.dest, name), mode: t.mode === undefined ? PRIVATE_ACCESS.mode : (parseMode(t.mode, field)) };
      await absorbing(issues, () => checkTemplate(spec, [name], field));
      templates.push(spec);
      requests.push({ name, path: spec.dest, field, template: templates.length - 1 });
    }
    if (templates.length > 0) sinks.templates = templates;
    result.set(name, sinks);
  }
  if (issues.length > 0) throw new ValidationError(issues);
  // The rule of shared directories, as for the daemon-wide sinks.
  const placed = await placeSinks(requests, (file) => [file]);
  placed.forEach((sink, i) => {
    const request = requests[i] as (typeof requests)[number];
    const sinks = result.get(request.name) as ProfileSinks;
    if (request.template === undefined) sinks.tokenFile = sink.path;
    else sinks.templates = (sinks.templates ?? []).map((spec, j) => (j === request.template ? { ...spec, dest: sink.path } : spec));
    if (sink.movedBecause !== undefined) {
      log.info(
        { profile: request.name, event: 'sink.moved', op: 'start', field: request.field, configured: request.path, path: sink.path, reason: sink.movedBecause },
        `${request.field}: ${sink.movedBecause}, so ${request.path} is published as ${sink.path} (${PLACE_RULE})`,
      );
    }
  });
  return result;
}

