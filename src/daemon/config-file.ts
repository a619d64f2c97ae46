// The daemon's one configuration file (`syncauth daemon --config FILE`), YAML or JSON: which profiles to serve,
// where their tokens go (token file, templates, socket) and the daemon-wide settings. It says where tokens are
// written, so it is read as carefully as a template's source (a regular file, bounded, with a deadline, links
// followed only when trusted), and refused when another user could have written it. Every problem is named
// by its line and key, all at once, before anything starts; the same check runs again on SIGHUP.
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { isMap, isNode, isScalar, isSeq, LineCounter, parseDocument, type Document } from 'yaml';
import * as z from 'zod';
import { nearestName } from '../config.js';
import { ValidationError, type FieldIssue } from '../errors.js';
import { parseMode, resolveGroup } from '../publish/file.js';
import { FileRefusedError, readRegularFile } from '../publish/safe-read.js';
import { isProfileName } from '../profile/index.js';
import { daemonSectionShape, fileValueIssues, type DaemonSection } from './spec.js';

/** Far above any real configuration of even thousands of profiles. */
const MAX_CONFIG_BYTES = 256 * 1024;

export interface FileSink {
  path: string;
  mode?: string;
  group?: string;
}

export interface FileTemplate {
  source: string;
  dest: string;
  mode?: string;
}

/** A profile's own sinks as written: no socket (the one socket serves every profile). */
export interface ProfileFileSinks {
  token_file?: FileSink;
  templates?: FileTemplate[];
}

/** The file's content, checked; keys as written (snake case), values as the flags take them. */
export interface DaemonFileConfig {
  file: string;
  /** Absent: every stored profile, as without the file. */
  profiles?: string[];
  sinks: { token_file?: FileSink; templates?: FileTemplate[]; socket?: FileSink };
  /** Profiles' own sinks (`profiles.NAME.sinks`), by name: only those that have any. */
  profileSinks: Record<string, ProfileFileSinks>;
  daemon: DaemonSection;
  /** `FILE line N: key.path`, naming a key in messages; the key's line when it is in the file. */
  where(key: string | readonly (string | number)[]): string;
}

const absolutePath = z.string().min(1).refine((p) => path.isAbsolute(p), 'must be an absolute path');
const mode = z.string({ error: (issue) => (typeof issue.input === 'number' ? 'write the mode as a quoted string, like "0640" (unquoted, YAML reads it as a decimal number)' : undefined) });
const sink = z.strictObject({ path: absolutePath, mode: mode.optional(), group: z.union([z.string().min(1), z.number().int().min(0)]).transform(String).optional() });
const template = z.strictObject({
  source: absolutePath.refine((p) => !p.includes(':'), 'must not contain ":"'),
  dest: absolutePath.refine((p) => !p.includes(':'), 'must not contain ":"'),
  mode: mode.optional(),
});
const NAME_RULE = 'must be 1-64 letters, digits, dot, dash or underscore, starting with a letter or digit';
const SOCKET_RULE = 'the one socket (sinks.socket) serves every profile, each at /v1/token/<profile>: set it once, under the top-level sinks';
/** A profile's own sinks: a token file instead of the daemon-wide one, templates besides the daemon-wide ones. */
const profileSinksSchema = z
  .strictObject({ token_file: sink.optional(), templates: z.array(template).optional(), socket: z.unknown().optional() })
  .superRefine((value, ctx) => {
    if (value.socket !== undefined) ctx.addIssue({ code: 'custom', path: ['socket'], message: SOCKET_RULE });
  });
const profileEntrySchema = z.strictObject({ sinks: profileSinksSchema.optional() }).nullable();
/** A list of names, or a map keyed by name, each value empty (`docs:` or `docs: {}`) or the profile's own sinks. */
const profileList = z
  .unknown()
  .superRefine((value, ctx) => {
    if ((Array.isArray(value) && value.length === 0) || (value !== null && typeof value === 'object' && Object.keys(value).length === 0)) {
      ctx.addIssue({ code: 'custom', message: 'names no profile; leave the key out to serve every stored profile' });
    } else if (Array.isArray(value)) {
      value.forEach((name, i) => {
        if (typeof name !== 'string' || !isProfileName(name)) ctx.addIssue({ code: 'custom', path: [i], message: NAME_RULE });
      });
    } else if (value !== null && typeof value === 'object') {
      for (const [name, settings] of Object.entries(value)) {
        if (!isProfileName(name)) {
          ctx.addIssue({ code: 'custom', path: [name], message: NAME_RULE });
          continue;
        }
        const entry = profileEntrySchema.safeParse(settings);
        if (entry.success) continue;
        // Passed on whole (an unknown key stays one), under the profile's name.
        for (const issue of entry.error.issues) ctx.addIssue({ ...issue, path: [name, ...issue.path] } as Parameters<typeof ctx.addIssue>[0]);
      }
    } else {
      ctx.addIssue({ code: 'custom', message: 'must be a list of profile names, or a map keyed by profile name' });
    }
  })
  .transform((value) => {
    if (Array.isArray(value)) return { names: [...new Set(value as string[])], own: {} };
    const own: Record<string, ProfileFileSinks> = {};
    for (const [name, settings] of Object.entries(value as Record<string, unknown>)) {
      // Checked above (the issues found there fail the whole parse); parsed again for its output (a group as text).
      const sinks = profileEntrySchema.safeParse(settings).data?.sinks;
      if (sinks && (sinks.token_file || sinks.templates)) own[name] = { ...(sinks.token_file ? { token_file: sinks.token_file } : {}), ...(sinks.templates ? { templates: sinks.templates } : {}) };
    }
    return { names: Object.keys(value as object), own };
  });

const sinks = { token_file: sink, templates: template, socket: sink } as const;
const sinksSchema = z.strictObject({ token_file: sink.optional(), templates: z.array(template).optional(), socket: sink.optional() });
/** The daemon-wide settings: one key for each option of src/daemon/spec.ts that has one under `daemon`. */
const daemonSchema = z.strictObject(daemonSectionShape());

/**
 * Secrets never come from this file (it is readable where a token file's path is, and is often kept in a
 * repository): a key that names one is refused, naming the variable that takes it.
 */
const SECRET_KEYS: Readonly<Record<string, string>> = Object.freeze({
  notify_secret: 'SYNCAUTH_NOTIFY_SECRET',
  store_key: 'SYNCAUTH_STORE_KEY',
  api_key: 'SYNCAUTH_API_KEY',
  app_key: 'SYNCAUTH_APP_KEY',
  app_secret: 'SYNCAUTH_APP_SECRET',
  refresh_token: 'SYNCAUTH_REFRESH_TOKEN',
  grant_key: 'SYNCAUTH_GRANT_KEY',
});
/** Other names that say "secret": refused too, without a variable to name. */
const SECRET_LOOKING = /secret|password|passphrase|credential|private_key|(^|_)token$/i;

/** The issues of secret keys at the top level or under `daemon`; their keys are not reported again as unknown. */
function secretKeyIssues(content: unknown, where: (keys: readonly PropertyKey[]) => string): { issues: FieldIssue[]; keys: Set<string> } {
  const issues: FieldIssue[] = [];
  const keys = new Set<string>();
  const scan = (at: unknown, prefix: string[]): void => {
    if (at === null || typeof at !== 'object' || Array.isArray(at)) return;
    for (const key of Object.keys(at)) {
      const variable = SECRET_KEYS[key];
      if (variable === undefined && !SECRET_LOOKING.test(key)) continue;
      keys.add([...prefix, key].join('.'));
      issues.push({
        field: where([...prefix, key]),
        message: variable
          ? `is a secret, and secrets are never read from this file: set ${variable} in the daemon's environment instead (a systemd credential or an EnvironmentFile of mode 0600, a Kubernetes Secret)`
          : "looks like a secret, and secrets are never read from this file: give it to the daemon through its environment (see docs/configuration.md)",
      });
    }
  };
  scan(content, []);
  if (content !== null && typeof content === 'object') scan((content as Record<string, unknown>).daemon, ['daemon']);
  return { issues, keys };
}

const schema = z.strictObject({
  version: z.literal(1, { error: 'must be 1 (the only version of this file so far)' }),
  profiles: profileList.optional(),
  sinks: sinksSchema.optional(),
  daemon: daemonSchema.optional(),
});

/** Every key the file may have, dotted (a template's keys as `sinks.templates.source`): the example documents each. */
export const CONFIG_KEYS: readonly string[] = Object.freeze([
  'version',
  'profiles',
  // A profile's own sinks, under its name (shown as <name>).
  'profiles.<name>',
  'profiles.<name>.sinks',
  ...(['token_file', 'templates'] as const).flatMap((key) => [`profiles.<name>.sinks.${key}`, ...Object.keys(sinks[key].shape).map((field) => `profiles.<name>.sinks.${key}.${field}`)]),
  'sinks',
  ...Object.entries(sinks).flatMap(([key, shape]) => [`sinks.${key}`, ...Object.keys(shape.shape).map((field) => `sinks.${key}.${field}`)]),
  'daemon',
  ...Object.keys(daemonSchema.shape).map((key) => `daemon.${key}`),
]);

/**
 * The line of the key at `keys` (of a list's item, the item's): a value's problem is named on its key's line.
 * A key missing from the file gets its nearest ancestor's line.
 */
function lineOf(doc: Document, lines: LineCounter, keys: readonly PropertyKey[]): number {
  let node: unknown = doc.contents;
  let offset = isNode(node) ? (node.range?.[0] ?? 0) : 0;
  for (const key of keys) {
    if (isMap(node)) {
      const pair = node.items.find((item) => isScalar(item.key) && String(item.key.value) === String(key));
      if (!pair) break;
      offset = isNode(pair.key) ? (pair.key.range?.[0] ?? offset) : offset;
      node = pair.value;
    } else if (isSeq(node)) {
      const item: unknown = node.items[Number(key)];
      if (!isNode(item)) break;
      offset = item.range?.[0] ?? offset;
      node = item;
    } else {
      break;
    }
  }
  return lines.linePos(offset).line;
}

function dotted(keys: readonly PropertyKey[]): string {
  return keys.map((k, i) => (typeof k === 'number' ? `[${k}]` : `${i === 0 ? '' : '.'}${String(k)}`)).join('') || '(top level)';
}

/** The keys the file may have where `keys` leads (a list's items and a profile's name stand for any). */
function keysBeside(keys: readonly PropertyKey[]): string[] {
  const parent = keys.filter((key) => typeof key !== 'number').map((key, i) => (i === 1 && keys[0] === 'profiles' ? '<name>' : String(key))).join('.');
  const prefix = parent === '' ? '' : `${parent}.`;
  return CONFIG_KEYS.filter((key) => key.startsWith(prefix) && !key.slice(prefix.length).includes('.')).map((key) => key.slice(prefix.length));
}

/** Parses and checks the text of a configuration file; every problem is one issue, named by line and key. */
export function parseDaemonConfig(text: string, file: string): DaemonFileConfig {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true });
  const label = (line: number, key: string): string => `${file} line ${line}: ${key}`;
  if (doc.errors.length > 0) {
    // The first few: after one, the rest are often its echoes.
    throw new ValidationError(doc.errors.slice(0, 5).map((error) => ({ field: label(lines.linePos(error.pos[0]).line, '(syntax)'), message: error.message.split('\n')[0] ?? error.message })));
  }
  const where = (keys: readonly PropertyKey[]): string => label(lineOf(doc, lines, keys), dotted(keys));
  let content: unknown;
  try {
    content = doc.toJS({ maxAliasCount: 100 }) ?? {};
  } catch (error) {
    // Aliases that would expand without bound (a "billion laughs" file).
    throw new ValidationError([{ field: label(1, '(syntax)'), message: (error as Error).message }]);
  }
  const secrets = secretKeyIssues(content, where);
  const result = schema.safeParse(content);
  if (!result.success || secrets.issues.length > 0) {
    const issues: FieldIssue[] = [...secrets.issues];
    for (const issue of result.error?.issues ?? []) {
      if (issue.code === 'unrecognized_keys') {
        for (const key of issue.keys) {
          if (secrets.keys.has([...issue.path, key].join('.'))) continue;
          const meant = nearestName(key, keysBeside(issue.path));
          issues.push({ field: where([...issue.path, key]), message: `is not a key of this file${meant ? `; did you mean ${dotted([...issue.path, meant])}?` : ''} (see deploy/syncauth.yaml)` });
        }
      } else {
        issues.push({ field: where(issue.path), message: issue.message });
      }
    }
    throw new ValidationError(issues);
  }
  const data = result.data as z.infer<typeof schema>;
  const config: DaemonFileConfig = {
    file,
    ...(data.profiles !== undefined ? { profiles: data.profiles.names } : {}),
    sinks: data.sinks ?? {},
    profileSinks: data.profiles?.own ?? {},
    daemon: data.daemon ?? {},
    // A dotted key, or its parts (a profile's name may contain a dot).
    where: (key) => where(typeof key === 'string' ? key.split('.').map((part) => (/^\d+$/.test(part) ? Number(part) : part)) : key),
  };
  checkValues(config);
  return config;
}

/** What the schema cannot say: the same checks as the flags'. */
function checkValues(config: DaemonFileConfig): void {
  const issues: FieldIssue[] = [];
  const check = (key: string | (string | number)[], run: (field: string) => unknown): void => {
    try {
      run(config.where(key));
    } catch (error) {
      if (!(error instanceof ValidationError)) issues.push({ field: config.where(key), message: (error as Error).message });
      else issues.push(...error.issues);
    }
  };
  const { sinks, profileSinks } = config;
  // The options' own checks (spec.ts), then the parts of the sinks that have no flag of their own.
  issues.push(...fileValueIssues(config, (keys) => config.where(keys)));
  sinks.templates?.forEach((t, i) => {
    if (t.mode !== undefined) check(`sinks.templates.${i}.mode`, (field) => parseMode(t.mode as string, field));
  });
  for (const [name, own] of Object.entries(profileSinks)) {
    if (own.token_file?.mode !== undefined) check(['profiles', name, 'sinks', 'token_file', 'mode'], (field) => parseMode(own.token_file?.mode as string, field));
    own.templates?.forEach((t, i) => {
      if (t.mode !== undefined) check(['profiles', name, 'sinks', 'templates', i, 'mode'], (field) => parseMode(t.mode as string, field));
    });
  }
  if (issues.length > 0) throw new ValidationError(issues);
}

/** Group names resolve against /etc/group: a separate, asynchronous step, so that a reload checks them too. */
async function checkGroups(config: DaemonFileConfig): Promise<void> {
  const issues: FieldIssue[] = [];
  const groups: [string | string[], string | undefined][] = [
    ['sinks.token_file.group', config.sinks.token_file?.group],
    ['sinks.socket.group', config.sinks.socket?.group],
    ...Object.entries(config.profileSinks).map(([name, own]): [string[], string | undefined] => [['profiles', name, 'sinks', 'token_file', 'group'], own.token_file?.group]),
  ];
  for (const [key, group] of groups) {
    if (group === undefined) continue;
    await resolveGroup(group, config.where(key)).catch((error: unknown) => {
      if (!(error instanceof ValidationError)) throw error;
      issues.push(...error.issues);
    });
  }
  if (issues.length > 0) throw new ValidationError(issues);
}

const STICKY = 0o1000;

/**
 * The file names where tokens go: nobody but root and this user may have written it, nor may anyone else be
 * able to replace it in its directory (a sticky directory such as /tmp lets them add files, not replace ours).
 */
async function checkOwnership(file: string): Promise<void> {
  const own = process.geteuid?.() ?? -1;
  const refuse = (why: string): never => {
    throw new ValidationError([{ field: '--config', message: `${file} ${why}; it says where tokens are written, so only root or this user (uid ${own}) may be able to change it` }]);
  };
  const info = await stat(file);
  if (info.uid !== 0 && info.uid !== own) refuse(`belongs to uid ${info.uid}`);
  if (info.mode & 0o022) refuse(`is writable by its group or by others (0${(info.mode & 0o777).toString(8)})`);
  const dir = await stat(path.dirname(file));
  if (dir.uid !== 0 && dir.uid !== own) refuse(`is in ${path.dirname(file)}, which belongs to uid ${dir.uid}`);
  if (dir.mode & 0o022 && !(dir.mode & STICKY)) refuse(`is in ${path.dirname(file)}, which its group or others may write`);
}

/** Reads, checks and parses the configuration file; a ValidationError (exit 2) names what is wrong. */
export async function readDaemonConfig(file: string): Promise<DaemonFileConfig> {
  const absolute = path.resolve(file);
  let text: string;
  try {
    await checkOwnership(absolute);
    text = await readRegularFile(absolute, { maxBytes: MAX_CONFIG_BYTES });
  } catch (error) {
    if (error instanceof ValidationError) throw error;
    if (error instanceof FileRefusedError) throw new ValidationError([{ field: '--config', message: error.message }]);
    const code = (error as NodeJS.ErrnoException).code;
    const message = code === 'ENOENT' ? `${absolute} does not exist` : code ? `cannot read ${absolute} (${code})` : (error as Error).message;
    throw new ValidationError([{ field: '--config', message }]);
  }
  const config = parseDaemonConfig(text, absolute);
  await checkGroups(config);
  return config;
}
