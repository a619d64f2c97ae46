// Request-side config shapes of the 21 source connector types (SPEC §1), checked before anything is sent.
//
// The public schema types `config` as an untagged anyOf of the per-type models plus a generic untyped object, so
// by that schema any object passes and mistakes only surface later as an opaque 412/500 from the service, or as a
// connector that fails on its first run. We never offer the untyped alternative: every config is validated against
// the shape of its own type, strictly, so a misspelt or misplaced field is caught here, named, and explained.
//
// Validation never transforms: a config that passes is sent exactly as the user wrote it (no defaults filled in),
// because the service applies its own defaults and some of ours disagree with its documentation (e.g. `recursive`).
import * as z from 'zod';
import { fieldName } from '../errors.js';
import type { FieldIssue } from '../errors.js';
import { SOURCE_TYPES } from './models.js';
import type { SourceType } from './models.js';

// ---------------------------------------------------------------------------------------------------------------
// Secrets

/**
 * Config fields whose values are credentials, across all types. Matching is by name (case-insensitive, `-` and
 * `_` alike), so one name is masked in every type that uses it.
 */
export const SECRET_CONFIG_FIELDS: ReadonlySet<string> = new Set([
  // Plain credentials.
  'password', 'token', 'refresh_token', 'app_secret', 'api_token', 'account_key', 'sas_token', 'client_secret',
  'client_cred', 'es_api_key', 'secret', 'private_key',
  // Whole credential documents: box_app_config holds the app's client secret and private key; a Google service
  // account key is a JSON document with a private key (masked also when it is a SecretReference object: a
  // reference is harmless, but one rule for the field is easier to trust than a rule per value shape).
  'box_app_config', 'service_account_key',
  // Strings that embed credentials: a MongoDB URI carries `user:password@`, an Azure connection string carries
  // `AccountKey=`. Couchbase also has a `connection_string`, usually without credentials; it is masked too because
  // masking works by name, and hiding a host name costs less than leaking a key.
  'uri', 'connection_string',
  // Key halves of key/secret pairs. They identify rather than authenticate, but providers ask for them to be kept
  // private, and SPEC §3 keeps the Dropbox app_key in the keychain with the other secrets; masking it everywhere
  // keeps `source get` consistent with the logs. S3 `key` is the AWS access key id, `kafka_api_key` the Confluent
  // key id, `consumer_key` the Salesforce connected-app key. Plain identifiers such as client_id, account_name,
  // username or tenant stay visible: users need them to tell connectors apart.
  'app_key', 'key', 'kafka_api_key', 'consumer_key',
]);

const MASK = '********';

function normalizedName(name: string): string {
  return name.toLowerCase().replaceAll('-', '_');
}

/** Whether a config field (in any spelling: `api-token`, `API_TOKEN`) carries a secret. */
export function isSecretConfigField(name: string): boolean {
  return SECRET_CONFIG_FIELDS.has(normalizedName(name));
}

/** A deep copy of `config` with the value of every secret field, at any depth, replaced by `********`. */
export function maskSourceConfig(config: Record<string, unknown>): Record<string, unknown> {
  return maskValue(config) as Record<string, unknown>;
}

function maskValue(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(maskValue);
  if (!isPlainObject(value)) return value;
  // Object.fromEntries defines own properties, so even a `__proto__` key is copied as data.
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, isSecretConfigField(k) && v !== null && v !== undefined ? MASK : maskValue(v)]),
  );
}

// ---------------------------------------------------------------------------------------------------------------
// Messages

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** How a wrong value is shown in a message; a secret's value is described by its kind only. */
function shown(value: unknown, secret: boolean): string {
  if (value === null) return 'null';
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return value.length === 0 ? 'an empty array' : 'an array';
  switch (typeof value) {
    case 'string':
      if (value === '') return 'an empty string';
      return secret ? 'a string' : quoted(value);
    case 'number':
      return secret ? 'a number' : String(value);
    case 'boolean':
      return secret ? 'a boolean' : String(value);
    case 'object':
      return 'an object';
    default:
      return `a ${typeof value}`;
  }
}

function quoted(text: string): string {
  const json = JSON.stringify(text);
  return json.length > 72 ? `${json.slice(0, 68)}…"` : json;
}

function joinAnd(words: readonly string[]): string {
  if (words.length <= 1) return words.join('');
  return `${words.slice(0, -1).join(', ')} and ${words[words.length - 1] ?? ''}`;
}

/** Optimal string alignment distance: Levenshtein plus adjacent transpositions (`hsot` is one edit from `host`). */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) (d[0] as number[])[j] = j;
  for (let i = 1; i <= a.length; i++) {
    const row = d[i] as number[];
    const prev = d[i - 1] as number[];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min((prev[j] as number) + 1, (row[j - 1] as number) + 1, (prev[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        best = Math.min(best, ((d[i - 2] as number[])[j - 2] as number) + 1);
      }
      row[j] = best;
    }
  }
  return (d[a.length] as number[])[b.length] as number;
}

/**
 * The known name closest to `unknown`, if it is plausibly a misspelling: the same after ignoring case and `-`/`_`,
 * or within two edits (one for names of three letters or fewer, where two edits reach almost anything).
 */
function closest(unknown: string, known: readonly string[]): string | undefined {
  const target = normalizedName(unknown);
  const limit = target.length <= 3 ? 1 : 2;
  let best: string | undefined;
  let bestDistance = limit + 1;
  for (const name of known) {
    const distance = editDistance(target, normalizedName(name));
    if (distance < bestDistance) {
      best = name;
      bestDistance = distance;
    }
  }
  return best;
}

function unknownFieldMessage(type: SourceType, key: string, known: readonly string[]): string {
  const suggestion = closest(key, known);
  return suggestion === undefined
    ? `unknown field for type ${type}; its fields are ${known.join(', ')}`
    : `unknown field for type ${type}; did you mean ${suggestion}?`;
}

// ---------------------------------------------------------------------------------------------------------------
// Field builders. Each knows its type and whether it holds a secret, so messages can name the type when a field is
// missing and never echo a secret's value.

interface FieldContext {
  type: SourceType;
  secret: boolean;
}
/** A field's schema for a type; its zod type is kept, so each config's TypeScript shape is inferred from it. */
type Field<S extends z.ZodType = z.ZodType> = (ctx: FieldContext) => S;
type IssueInput = { readonly input?: unknown };

function expecting(ctx: FieldContext, expected: string): (issue: IssueInput) => string {
  return (issue) =>
    issue.input === undefined ? `required for type ${ctx.type}` : `expected ${expected}, got ${shown(issue.input, ctx.secret)}`;
}

const string = (c: FieldContext) => z.string({ error: expecting(c, 'a string') });
const stringOrNull = (c: FieldContext) => z.string({ error: expecting(c, 'a string or null') }).nullable();
const boolean = (c: FieldContext) => z.boolean({ error: expecting(c, 'true or false') });
const booleanOrNull = (c: FieldContext) => z.boolean({ error: expecting(c, 'true, false or null') }).nullable();

// Every integer in these configs is a port, a batch size or a count, for which 0 or less is never meaningful;
// the schema states minimum 1 for most of them, and we apply it to all.
const positiveInt = (c: FieldContext, expected: string) =>
  z.int({ error: expecting(c, expected) }).min(1, { error: expecting(c, expected) });
const count = (c: FieldContext) => positiveInt(c, 'an integer ≥ 1');
const countOrNull = (c: FieldContext) => positiveInt(c, 'an integer ≥ 1 or null').nullable();

const strings = (c: FieldContext) => z.array(z.string({ error: expecting(c, 'a string') }), { error: expecting(c, 'an array of strings') });
const stringsOrNull = (c: FieldContext) =>
  z.array(z.string({ error: expecting(c, 'a string') }), { error: expecting(c, 'an array of strings, or null') }).nullable();

function matching(pattern: RegExp, expected: string): Field<z.ZodString> {
  return (c) => z.string({ error: expecting(c, expected) }).regex(pattern, { error: expecting(c, expected) });
}

function optional<S extends z.ZodType>(field: Field<S>): Field<z.ZodOptional<S>> {
  return (c) => field(c).optional();
}

// Cross-field rules report through this, one issue per field named.
type Report = (field: string, message: string) => void;
type Rule = (config: Record<string, unknown>, report: Report) => void;

/** Set and not empty: the engine treats an empty credential like a missing one (Python truthiness). */
function given(config: Record<string, unknown>, field: string): boolean {
  const value = config[field];
  return value !== undefined && value !== null && value !== '';
}

/** The zod shape of a type's fields. */
type ShapeOf<F extends Record<string, Field>> = { [K in keyof F]: ReturnType<F[K]> };

/** The config a type's fields accept, as TypeScript sees it: required fields required, the others optional. */
type ConfigOf<F extends Record<string, Field>> = z.input<z.ZodObject<ShapeOf<F>, z.core.$strict>>;

interface Defined<C = Record<string, unknown>> {
  schema: z.ZodType<C, C>;
  fields: readonly string[];
}

/**
 * A type's fields and, built on first use, its schema: a command checks one type at most, and building all 21
 * would cost every process that loads this module.
 */
function define<F extends Record<string, Field>>(type: SourceType, fields: F, rule?: Rule): Defined<ConfigOf<F>> {
  const known = Object.keys(fields);
  let built: z.ZodType<ConfigOf<F>, ConfigOf<F>> | undefined;
  return {
    fields: known,
    get schema() {
      built ??= build(type, fields, known, rule) as unknown as z.ZodType<ConfigOf<F>, ConfigOf<F>>;
      return built;
    },
  };
}

function build(type: SourceType, fields: Record<string, Field>, known: readonly string[], rule: Rule | undefined): z.ZodType {
  const shape: Record<string, z.ZodType> = {};
  for (const [name, field] of Object.entries(fields)) shape[name] = field({ type, secret: isSecretConfigField(name) });
  const object = z.strictObject(shape, {
    error: (issue) =>
      issue.code === 'unrecognized_keys'
        ? issue.keys.map((key) => `${key}: ${unknownFieldMessage(type, key, known)}`).join('; ')
        : `expected an object with the fields of a ${type} config, got ${shown(issue.input, true)}`,
  });
  if (!rule) return object;
  return object.superRefine(
    (config, ctx) => {
      rule(config as Record<string, unknown>, (field, message) =>
        ctx.addIssue({ code: 'custom', path: [field], message, input: undefined }),
      );
    },
    // Run the rule even when a field is missing or mistyped, so the user sees every problem in one go.
    { when: (payload) => isPlainObject(payload.value) },
  );
}

// ---------------------------------------------------------------------------------------------------------------
// Dropbox remote_url

const DROPBOX_SCHEME = 'dropbox://';
const DROPBOX_EXAMPLE = 'dropbox://data';

function dropboxSegments(path: string): string[] {
  return path.split('/').filter((segment) => segment.trim() !== '' && segment !== '.');
}

/**
 * Why a dropbox `remote_url` will not work, as a sentence for the user, or null when it is fine. It must be
 * `dropbox://<subfolder>` (nested paths allowed): the service cannot read the root of the app folder itself.
 */
export function dropboxRemoteUrlProblem(remoteUrl: string): string | null {
  const createHint =
    'create a subfolder inside Apps/<app folder>/ in Dropbox and name it here, ' +
    `e.g. ${DROPBOX_EXAMPLE} for Apps/<app folder>/data`;
  if (remoteUrl.trim() === '') return `is empty, but must name a subfolder of the app folder: ${createHint}`;
  if (remoteUrl.trim() !== remoteUrl) return `has spaces at the start or end; write it as ${quoted(remoteUrl.trim())}`;
  if (!remoteUrl.startsWith(DROPBOX_SCHEME)) {
    if (remoteUrl.toLowerCase().startsWith(DROPBOX_SCHEME)) {
      return `the scheme must be lowercase: write ${DROPBOX_SCHEME}${remoteUrl.slice(DROPBOX_SCHEME.length)}`;
    }
    if (/^https?:\/\//i.test(remoteUrl)) {
      const inApp = /\/home\/Apps\/[^/]+\/(.+)$/i.exec(decodeSafely(remoteUrl.split(/[?#]/)[0] ?? ''));
      const sub = inApp?.[1] ? dropboxSegments(inApp[1]).join('/') : '';
      return (
        'is a web link, but the service wants dropbox://<subfolder>, the path of a subfolder inside the app folder' +
        (sub ? `: write dropbox://${sub}` : ` (e.g. ${DROPBOX_EXAMPLE} for Apps/<app folder>/data)`)
      );
    }
    const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(remoteUrl);
    if (scheme) return `has the scheme ${scheme[1] ?? ''}:, but must start with ${DROPBOX_SCHEME}, e.g. ${DROPBOX_EXAMPLE}`;
    const segments = dropboxSegments(remoteUrl.replaceAll('\\', '/'));
    if (segments.length > 0 && !segments.includes('..')) {
      return `must start with ${DROPBOX_SCHEME}: write ${DROPBOX_SCHEME}${segments.join('/')}`;
    }
    return `must be ${DROPBOX_SCHEME}<subfolder>, e.g. ${DROPBOX_EXAMPLE}`;
  }
  const path = remoteUrl.slice(DROPBOX_SCHEME.length);
  if (path.includes('\\')) return `uses a backslash; separate folders with /, e.g. dropbox://data/reports`;
  const segments = dropboxSegments(path);
  if (segments.includes('..')) return `must not contain "..": the service only reads inside the app folder`;
  if (segments.length === 0) return `${quoted(remoteUrl)} names the app folder's root, which the service cannot read: ${createHint}`;
  return null;
}

function decodeSafely(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** The Dropbox API path of a valid `remote_url`, inside the app folder: `dropbox://data/reports` → `/data/reports`. */
export function dropboxApiPath(remoteUrl: string): string {
  const path = remoteUrl.startsWith(DROPBOX_SCHEME) ? remoteUrl.slice(DROPBOX_SCHEME.length) : remoteUrl;
  const segments = dropboxSegments(path);
  // The Dropbox API names the root "" rather than "/"; only reached for a url that failed validation.
  return segments.length === 0 ? '' : `/${segments.join('/')}`;
}

const dropboxRemoteUrl = (c: FieldContext) =>
  z.string({ error: expecting(c, `a string like ${DROPBOX_EXAMPLE}`) }).superRefine((value, ctx) => {
    const problem = dropboxRemoteUrlProblem(value);
    if (problem) ctx.addIssue({ code: 'custom', message: problem, input: value });
  });

const DROPBOX_RENEWAL = ['refresh_token', 'app_key', 'app_secret'] as const;

// The engine renews tokens itself when refresh_token, app_key and app_secret are all set, and otherwise uses
// `token` alone. A partial set is refused even next to a token: the service would silently ignore it, and the
// connector would stop working when the token expires (within 4 hours), which is what this tool exists to prevent.
const dropboxCredentials: Rule = (config, report) => {
  const present = DROPBOX_RENEWAL.filter((f) => given(config, f));
  const hasToken = given(config, 'token');
  if (present.length === 0) {
    if (!hasToken) {
      report('token', 'required for type dropbox: give token, or refresh_token, app_key and app_secret together ' +
        '(then the service renews tokens itself)');
    }
    return;
  }
  if (present.length === DROPBOX_RENEWAL.length) return;
  for (const missing of DROPBOX_RENEWAL.filter((f) => !present.includes(f))) {
    report(missing, hasToken
      ? `required with ${joinAnd(present)} (the service needs all three to renew tokens itself; without them it ` +
        'uses token alone, which expires within 4 hours)'
      : `required with ${joinAnd(present)} (the service needs all three to renew tokens itself), or give token`);
  }
};

// ---------------------------------------------------------------------------------------------------------------
// Other special fields

// MongoDB's own URI grammar, as the public schema states it.
const MONGODB_URI =
  /^mongodb(?:\+srv)?:\/\/(?:([^:@/\s]+)(?::([^@/\s]*))?@)?([^/\s:,]+)(?::(\d+))?(?:,([^/\s:,]+)(?::(\d+))?)*(?:\/([^/\s?]*))?(?:\?([^/\s]*))?$/;

// The uri carries a password, so a mismatch is explained by what is wrong with it, never by showing it.
const mongodbUri = (c: FieldContext) =>
  z.string({ error: expecting(c, 'a MongoDB connection string') }).superRefine((value, ctx) => {
    if (MONGODB_URI.test(value)) return;
    let why: string;
    if (!/^mongodb(\+srv)?:\/\//.test(value)) why = 'must start with mongodb:// or mongodb+srv://';
    else if (/\s/.test(value)) why = 'must not contain spaces or line breaks';
    else why = 'is not a valid MongoDB connection string: expected mongodb[+srv]://[user[:password]@]host[:port][,host[:port]…][/database][?options]';
    ctx.addIssue({ code: 'custom', message: `${why} (the value is not shown: it may carry a password)`, input: undefined });
  });

// The 3.0.2 schema allows only <tenant>.sharepoint.com with an optional /sites/<name>; later versions of the
// service accept any host with /sites/ or /teams/, so both forms pass.
const SHAREPOINT_SITE_302 = /^https:\/\/([a-zA-Z0-9-]+)(-admin)?\.sharepoint\.com(\/sites\/[a-zA-Z0-9-_]+)?$/;
const SHAREPOINT_SITE_LATER = /^https:\/\/[^/\s?#]+\/(sites|teams)\/[^/\s?#]+\/?$/;
const sharepointSite = (c: FieldContext) => {
  const expected = 'a SharePoint site URL like https://contoso.sharepoint.com/sites/research';
  return z.string({ error: expecting(c, expected) })
    .refine((v) => SHAREPOINT_SITE_302.test(v) || SHAREPOINT_SITE_LATER.test(v), { error: expecting(c, expected) });
};

// google_drive takes the key JSON as a string, or a reference to a secret stored on the service.
const serviceAccountKeyOrReference = (c: FieldContext) =>
  z.union(
    [
      z.string(),
      z.strictObject({ id: z.string(), type: z.enum(['rsa', 'rsa_aes']).optional() }),
    ],
    { error: expecting(c, 'the service account key JSON as a string, or a secret reference {"id": "…", "type": "rsa" | "rsa_aes"}') },
  );

const ZENDESK_ITEM_TYPES = ['tickets', 'articles'] as const;
const zendeskItemType = (c: FieldContext) =>
  z.enum(ZENDESK_ITEM_TYPES, { error: expecting(c, '"tickets", "articles" or null') }).nullable();

const ISO_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/;

/** Whether text is an ISO-8601 date or date-time that names a real day and time (no 30 February). */
function isIsoDateTime(text: string): boolean {
  const m = ISO_DATE_TIME.exec(text);
  if (!m) return false;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const date = new Date(Date.UTC(year, month - 1, day));
  if (date.getUTCFullYear() !== year || date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day) return false;
  return Number(m[4] ?? 0) <= 23 && Number(m[5] ?? 0) <= 59 && Number(m[6] ?? 0) <= 59;
}

const isoDateTime = (c: FieldContext) => {
  const expected = 'an ISO-8601 date or date-time like 2024-01-31 or 2024-01-31T12:00:00Z';
  return z.string({ error: expecting(c, expected) }).refine(isIsoDateTime, { error: expecting(c, expected) });
};

const slackChannels = (c: FieldContext) =>
  z.array(z.string({ error: expecting(c, 'a channel ID or name') }).min(1, { error: expecting(c, 'a channel ID or name') }), {
    error: expecting(c, 'an array of channel IDs or names'),
  }).min(1, { error: () => 'expected at least one channel ID or name, got an empty array' });

// ---------------------------------------------------------------------------------------------------------------
// The 21 types

const optString = optional(string);
const optStringOrNull = optional(stringOrNull);
const optBoolean = optional(boolean);
const optCount = optional(count);
const optStringsOrNull = optional(stringsOrNull);

const definitions = {
  azure: define('azure', {
    remote_url: matching(/^(az:\/\/|abfs:\/\/)/, 'a URL starting with az:// or abfs://, like az://<container>/<path>'),
    account_name: optStringOrNull,
    account_key: optStringOrNull,
    connection_string: optStringOrNull,
    sas_token: optStringOrNull,
    recursive: optBoolean,
  }, (config, report) => {
    // Account-key and SAS authentication both identify the storage account by name; a key without it fails late.
    for (const credential of ['account_key', 'sas_token']) {
      if (given(config, credential) && !given(config, 'account_name') && !given(config, 'connection_string')) {
        report('account_name', `required with ${credential}`);
        return;
      }
    }
  }),
  box: define('box', {
    box_app_config: string,
    remote_url: matching(/^box:\/\//, 'a URL starting with box://, like box://<folder path>'),
    recursive: optBoolean,
  }),
  confluence: define('confluence', {
    url: string,
    username: string,
    password: optStringOrNull,
    api_token: optStringOrNull,
    token: optStringOrNull,
    cloud: optBoolean,
    extract_images: optBoolean,
    extract_files: optBoolean,
    max_num_of_spaces: optCount,
    max_num_of_docs_from_each_space: optCount,
    spaces: optStringsOrNull,
  }),
  couchbase: define('couchbase', {
    bucket: string,
    connection_string: string,
    scope: optStringOrNull,
    collection: optStringOrNull,
    batch_size: count,
    username: string,
    password: string,
    collection_id: string,
  }),
  // The documentation also shows a personal access token (`token`) in place of the OAuth client pair.
  databricks_volumes: define('databricks_volumes', {
    host: string,
    catalog: string,
    schema: optString,
    volume: string,
    volume_path: string,
    client_secret: optString,
    client_id: optString,
    token: optString,
  }, (config, report) => {
    if (given(config, 'token')) return;
    for (const field of ['client_id', 'client_secret']) {
      if (config[field] === undefined) {
        report(field, 'required for type databricks_volumes, unless token (a personal access token) is given');
      }
    }
  }),
  dropbox: define('dropbox', {
    remote_url: dropboxRemoteUrl,
    recursive: optBoolean,
    token: optString,
    refresh_token: optString,
    app_key: optString,
    app_secret: optString,
  }, dropboxCredentials),
  elasticsearch: define('elasticsearch', {
    hosts: strings,
    index_name: string,
    es_api_key: string,
  }),
  gcs: define('gcs', {
    remote_url: matching(/^(gs|gcs):\/\//, 'a URL starting with gs:// or gcs://, like gs://<bucket>/<path>'),
    service_account_key: string,
    recursive: optBoolean,
  }),
  google_drive: define('google_drive', {
    drive_id: string,
    service_account_key: serviceAccountKeyOrReference,
    extensions: optStringsOrNull,
    recursive: optBoolean,
  }),
  // The schema names the field bootstrap_servers; the documentation sends bootstrap_server, and the live service
  // has been seen asking for that spelling (412). Either is accepted; both together must agree.
  'kafka-cloud': define('kafka-cloud', {
    bootstrap_servers: optString,
    bootstrap_server: optString,
    port: optCount,
    group_id: optStringOrNull,
    topic: string,
    kafka_api_key: string,
    secret: string,
    num_messages_to_consume: optCount,
  }, (config, report) => {
    const plural = config['bootstrap_servers'];
    const singular = config['bootstrap_server'];
    if (plural === undefined && singular === undefined) {
      report('bootstrap_servers', 'required for type kafka-cloud (or give it as bootstrap_server, the spelling some ' +
        'versions of the service ask for)');
    } else if (typeof plural === 'string' && typeof singular === 'string' && plural !== singular) {
      report('bootstrap_server', 'differs from bootstrap_servers; give one of them, or the same value in both');
    }
  }),
  mongodb: define('mongodb', {
    database: string,
    collection: string,
    uri: mongodbUri,
  }),
  // The documentation also shows an optional password (for user-delegated sign-in).
  onedrive: define('onedrive', {
    client_id: string,
    user_pname: string,
    tenant: string,
    authority_url: string,
    client_cred: string,
    recursive: optBoolean,
    path: string,
    password: optStringOrNull,
  }),
  outlook: define('outlook', {
    authority_url: optStringOrNull,
    tenant: optStringOrNull,
    client_id: string,
    client_cred: string,
    outlook_folders: optStringsOrNull,
    recursive: optBoolean,
    user_email: string,
  }),
  postgres: define('postgres', {
    host: string,
    database: string,
    port: count,
    username: string,
    password: string,
    table_name: string,
    batch_size: count,
    id_column: optString,
    fields: optStringsOrNull,
  }),
  s3: define('s3', {
    remote_url: matching(/^s3:\/\//, 'a URL starting with s3://, like s3://<bucket>/<path>'),
    anonymous: optBoolean,
    key: optStringOrNull,
    secret: optStringOrNull,
    token: optStringOrNull,
    endpoint_url: optStringOrNull,
    recursive: optBoolean,
  }, (config, report) => {
    // An access key id is useless without its secret and the reverse; AWS would reject the request much later.
    if (given(config, 'key') && !given(config, 'secret')) report('secret', 'required with key');
    if (given(config, 'secret') && !given(config, 'key')) report('key', 'required with secret');
  }),
  salesforce: define('salesforce', {
    username: string,
    consumer_key: string,
    private_key: string,
    categories: strings,
  }),
  // The documentation also shows `library` (the document library) and `password`.
  sharepoint: define('sharepoint', {
    site: sharepointSite,
    tenant: string,
    authority_url: optString,
    user_pname: string,
    client_id: string,
    client_cred: string,
    recursive: optBoolean,
    path: optStringOrNull,
    library: optStringOrNull,
    password: optStringOrNull,
  }),
  // No model in the public schema; this is the documented shape, with the date keys hyphenated as documented.
  slack: define('slack', {
    channels: slackChannels,
    token: string,
    'start-date': optional(isoDateTime),
    'end-date': optional(isoDateTime),
  }, (config, report) => {
    const start = config['start-date'];
    const end = config['end-date'];
    if (typeof start === 'string' && typeof end === 'string' && isIsoDateTime(start) && isIsoDateTime(end) &&
      Date.parse(end) < Date.parse(start)) {
      report('end-date', `is before start-date (${quoted(end)} < ${quoted(start)})`);
    }
  }),
  snowflake: define('snowflake', {
    account: string,
    role: string,
    user: string,
    password: string,
    host: string,
    port: optCount,
    database: string,
    // Some documentation lists schema as required; the public schema does not, so neither do we.
    schema: optString,
    table_name: string,
    batch_size: optCount,
    id_column: string,
    fields: optStringsOrNull,
  }),
  jira: define('jira', {
    url: string,
    username: string,
    password: optStringOrNull,
    token: optStringOrNull,
    cloud: optional(booleanOrNull),
    projects: optStringsOrNull,
    boards: optStringsOrNull,
    issues: optStringsOrNull,
    status_filters: optStringsOrNull,
    download_attachments: optional(booleanOrNull),
  }),
  // The documentation writes api-token, item-type and batch-size; the schema, which the service follows, uses
  // underscores, so the hyphenated forms are refused with the underscore name suggested.
  zendesk: define('zendesk', {
    subdomain: string,
    email: string,
    api_token: string,
    item_type: optional(zendeskItemType),
    batch_size: optional(countOrNull),
  }),
} satisfies Record<SourceType, Defined<object>>;

/**
 * The config each source type accepts, typed from the same schemas that check it at run time: fields the schema
 * requires are required, the others optional, and no other field is allowed. Rules across fields (e.g. dropbox's
 * token, or refresh_token, app_key and app_secret together) are checked at run time only.
 */
export type SourceConfigs = { [T in SourceType]: z.input<(typeof definitions)[T]['schema']> };

/** The config of one source type, e.g. `SourceConfig<'dropbox'>`. */
export type SourceConfig<T extends SourceType> = SourceConfigs[T];

function mapTypes<T>(pick: (d: { schema: z.ZodType; fields: readonly string[] }) => T): Record<SourceType, T> {
  return Object.fromEntries(SOURCE_TYPES.map((t) => [t, pick(definitions[t])])) as Record<SourceType, T>;
}

/** The strict request-side config schema of each source type, each built when first read. */
export const sourceConfigSchemas: Record<SourceType, z.ZodType> = Object.defineProperties(
  {},
  Object.fromEntries(SOURCE_TYPES.map((t) => [t, { enumerable: true, get: () => definitions[t].schema }])),
) as Record<SourceType, z.ZodType>;

/** The config fields each source type accepts, in the order of the service's documentation. */
export const SOURCE_CONFIG_FIELDS: Record<SourceType, readonly string[]> = mapTypes((d) => d.fields);

// ---------------------------------------------------------------------------------------------------------------
// Validation

export type SourceConfigResult = { ok: true; config: Record<string, unknown> } | { ok: false; issues: FieldIssue[] };

function isSourceType(type: unknown): type is SourceType {
  return typeof type === 'string' && (SOURCE_TYPES as readonly string[]).includes(type);
}

/**
 * Checks `config` against the shape of `type`. On success the very object given is returned, unchanged; on failure
 * every problem found, each on a dotted field name under `config.` (or `type`).
 */
export function validateSourceConfig(type: string, config: unknown): SourceConfigResult {
  if (!isSourceType(type)) {
    const suggestion = typeof type === 'string' ? closest(type, SOURCE_TYPES) : undefined;
    const got = typeof type === 'string' ? quoted(type) : shown(type, false);
    return {
      ok: false,
      issues: [{
        field: 'type',
        message: `unknown source type ${got}${suggestion ? ` (did you mean ${suggestion}?)` : ''}; ` +
          `expected one of the 21 types: ${SOURCE_TYPES.join(', ')}`,
      }],
    };
  }
  if (!isPlainObject(config)) {
    return {
      ok: false,
      // The whole config may be a secret pasted in the wrong place, so its value is never shown.
      issues: [{ field: 'config', message: `expected an object with the fields of a ${type} config, got ${shown(config, true)}` }],
    };
  }
  const result = (definitions[type].schema as z.ZodType).safeParse(config);
  if (result.success) return { ok: true, config };
  const known = definitions[type].fields;
  const issues: FieldIssue[] = [];
  for (const issue of result.error.issues) {
    if (issue.code === 'unrecognized_keys' && issue.path.length === 0) {
      for (const key of issue.keys) {
        issues.push({ field: fieldName([key], 'config'), message: unknownFieldMessage(type, key, known) });
      }
    } else {
      issues.push({ field: fieldName(issue.path, 'config'), message: issue.message });
    }
  }
  return { ok: false, issues };
}
