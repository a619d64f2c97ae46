// The one redaction step of the process. Every secret syncauth reads is registered here, with the forms it
// takes on the wire or in a config (URL- and form-encoded, JSON-escaped, base64 and base64url, hex in lower
// and upper case, and the app key and secret as an HTTP Basic credential), and `redact` cuts all of them out of any text: error messages, log lines, state fields.
// A provider that echoes a request back, or a message that quotes a setting, cannot carry a secret past it.

import type * as Crypto from 'node:crypto';

export const REDACTED = '[redacted]';

// Shorter values are not registered: blanking every occurrence of a short word in every line the process
// writes would hide ordinary text, and no real key, secret or token is that short.
const MIN_SECRET_LENGTH = 8;
// The values of one request are cut out of messages about that request only, so a shorter one (a password in
// a connector config) can be afforded there.
const MIN_EXTRA_LENGTH = 4;

// A registered form is kept as its length and a digest, never as the text: a Dropbox access token is some 1,300
// characters and its eight spellings some 12,000, which held as strings cost a daemon serving 10,000 profiles
// over 200 MiB. A form is found where the hash of the text's window matches its prefix's: the text there, taken
// at each length registered under that prefix (longest first), is digested and looked up.
interface Form {
  /** 16 bytes of the form's SHA-256, as 16 one-byte characters: the registry's key of it. */
  readonly digest: string;
  readonly length: number;
  /** The map key of the hash of its first MIN_SECRET_LENGTH characters. */
  readonly prefix: number;
}

// Each registered form (by digest) with the number of its holders: a form registered for good
// (registerSecrets) is held forever; one a slot holds (registerSlotSecret) goes once no slot holds it and it
// was never registered for good.
const FOR_GOOD = Number.POSITIVE_INFINITY;
const known = new Map<string, number>();
// The forms each slot holds now: a value learnt again and again (each new access token of a profile) replaces
// the last one's forms rather than adding to them, so the registry does not grow with the process's age.
const slots = new Map<string, readonly Form[]>();

/** The lengths of the forms registered under one prefix, longest first, each with how many forms have it. */
interface Bucket {
  lengths: number[];
  counts: Map<number, number>;
}
// Every registered form's length, found by a hash of its first MIN_SECRET_LENGTH characters. Scanning a text
// costs a few integer operations per character whatever the number of secrets (the hash of each window is
// rolled on from the last, no string is made): a daemon serving 10,000 profiles registers some 50,000 forms,
// and one regular expression alternating over them all cost half a millisecond per log line and seconds to
// build. The encoded forms of secrets that begin alike (`sl.u.` in hex) share a prefix, and the lengths
// under it are few: a window whose prefix is known costs a digest per length there, however many forms.
const byPrefix = new Map<number, Bucket>();

// node:crypto is loaded when the first secret is registered, not by every command (it costs a tenth of Node's
// start-up, and `--version` or `--help` registers none).
let hashes: typeof Crypto | undefined;

function digestOf(text: string): string {
  hashes ??= process.getBuiltinModule('node:crypto');
  return hashes.createHash('sha256').update(text, 'utf8').digest().toString('latin1', 0, 16);
}

/** A form as the registry keeps it: no reference to its text. */
function formOf(text: string): Form {
  return { digest: digestOf(text), length: text.length, prefix: keyOf(windowHash(text, 0)) };
}

// Rolling hash of a window: h = c0·M^(w-1) + c1·M^(w-2) + … + c(w-1), in 32-bit integers (wrapping).
const MULTIPLIER = 0x01000193;
let topPower = 1;
for (let k = 1; k < MIN_SECRET_LENGTH; k += 1) topPower = Math.imul(topPower, MULTIPLIER);
const TOP_POWER = topPower;

/** The hash of the MIN_SECRET_LENGTH characters of `text` from `at`. */
function windowHash(text: string, at: number): number {
  let h = 0;
  for (let k = at; k < at + MIN_SECRET_LENGTH; k += 1) h = (Math.imul(h, MULTIPLIER) + text.charCodeAt(k)) | 0;
  return h;
}

/** The map key of a window hash: mixed, and small enough to stay an integer the map hashes cheaply. */
const keyOf = (h: number): number => (h ^ (h >>> 15)) & 0x3fffffff;

function base64(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64');
}

/** Characters that no encoding formsOf makes changes. */
const PLAIN = /^[A-Za-z0-9._-]*$/;

/** The spellings of one value: as is, percent-encoded, form-encoded, inside a JSON string, base64(url), hex. */
function formsOf(value: string): string[] {
  const bytes = Buffer.from(value, 'utf8');
  const hex = bytes.toString('hex');
  // A token's alphabet (letters, digits, `.`, `_`, `-`) reads the same percent-, form- and JSON-encoded: those
  // three spellings are the value itself, not made again for each access token renewed.
  if (PLAIN.test(value)) return [value, bytes.toString('base64'), bytes.toString('base64url'), hex, hex.toUpperCase()];
  return [
    value,
    encodeURIComponent(value),
    new URLSearchParams({ v: value }).toString().slice(2),
    JSON.stringify(value).slice(1, -1),
    base64(value),
    Buffer.from(value, 'utf8').toString('base64url'),
    hex,
    hex.toUpperCase(),
  ];
}

/** HTTP Basic as clients send it: `key:secret` base64-encoded, raw or form-encoded first (RFC 6749 §2.3.1). */
function basicFormsOf(appKey: string, appSecret: string): string[] {
  const form = (v: string) => new URLSearchParams({ v }).toString().slice(2);
  return [base64(`${appKey}:${appSecret}`), base64(`${form(appKey)}:${form(appSecret)}`)];
}

/** Adds one holder of each form (`FOR_GOOD`: held forever); a form not registered before is put in place. */
function add(forms: readonly Form[], holders = FOR_GOOD): void {
  for (const form of forms) {
    const held = known.get(form.digest);
    known.set(form.digest, (held ?? 0) + holders);
    if (held !== undefined) continue;
    let bucket = byPrefix.get(form.prefix);
    if (!bucket) byPrefix.set(form.prefix, (bucket = { lengths: [], counts: new Map() }));
    const count = bucket.counts.get(form.length) ?? 0;
    bucket.counts.set(form.length, count + 1);
    if (count > 0) continue;
    let at = 0;
    while (at < bucket.lengths.length && (bucket.lengths[at] as number) > form.length) at += 1;
    bucket.lengths.splice(at, 0, form.length);
  }
}

/** Takes one holder of each form away; a form no one holds any more (never one held for good) is forgotten. */
function release(forms: readonly Form[]): void {
  for (const form of forms) {
    const held = known.get(form.digest);
    if (held === undefined) continue;
    if (held > 1) {
      known.set(form.digest, held - 1);
      continue;
    }
    known.delete(form.digest);
    const bucket = byPrefix.get(form.prefix);
    if (!bucket) continue;
    const count = (bucket.counts.get(form.length) ?? 1) - 1;
    if (count > 0) {
      bucket.counts.set(form.length, count);
      continue;
    }
    bucket.counts.delete(form.length);
    bucket.lengths.splice(bucket.lengths.indexOf(form.length), 1);
    if (bucket.lengths.length === 0) byPrefix.delete(form.prefix);
  }
}

/** The registry's forms of values: each spelling long enough, once. */
function registryForms(values: readonly string[]): Form[] {
  const texts = new Set<string>();
  for (const value of values) if (value.length >= MIN_SECRET_LENGTH) texts.add(value);
  return [...texts].map(formOf);
}

/** The length of the longest registered form `text` holds at `at`, of those whose prefix is `bucket`'s. */
function formAt(text: string, at: number, bucket: Bucket): number | undefined {
  for (const length of bucket.lengths) {
    if (at + length <= text.length && known.has(digestOf(text.slice(at, at + length)))) return length;
  }
  return undefined;
}

/** `text` with every registered form cut out, leftmost first, the longest where several start at one place. */
function replaceKnown(text: string): string {
  const last = text.length - MIN_SECRET_LENGTH;
  if (byPrefix.size === 0 || last < 0) return text;
  let out = '';
  let copied = 0;
  let h = windowHash(text, 0);
  for (let i = 0; ; ) {
    const bucket = byPrefix.get(keyOf(h));
    const hit = bucket ? formAt(text, i, bucket) : undefined;
    if (hit === undefined) {
      if (i === last) break;
      h = (Math.imul(h - Math.imul(text.charCodeAt(i), TOP_POWER), MULTIPLIER) + text.charCodeAt(i + MIN_SECRET_LENGTH)) | 0;
      i += 1;
      continue;
    }
    out += text.slice(copied, i) + REDACTED;
    i += hit;
    copied = i;
    if (i > last) break;
    h = windowHash(text, i);
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/** Makes `redact` cut out these values, in every form they are sent in, for the rest of the process. */
export function registerSecrets(...values: (string | undefined)[]): void {
  for (const value of values) if (value && value.length >= MIN_SECRET_LENGTH) add(registryForms(formsOf(value)));
}

/**
 * Makes `redact` cut out `value`, in every form, in place of what `slot` held before (undefined: nothing any
 * more). For a secret learnt anew again and again, such as each access token of one profile: the registry holds
 * one value per slot, not every value the process has seen. A form also registered by `registerSecrets` stays.
 * With `keepReplaced`, a different value replacing the slot's leaves the old one registered for good (a grant read
 * anew: the old one may still be in use somewhere); only an explicit release (undefined) lets it go.
 */
export function registerSlotSecret(slot: string, value: string | undefined, options: { keepReplaced?: boolean } = {}): void {
  const previous = slots.get(slot);
  // The token held again (renewed, then held by the worker): nothing changes.
  if (previous && value && previous[0]?.length === value.length && previous[0].digest === digestOf(value)) return;
  const forms = value && value.length >= MIN_SECRET_LENGTH ? registryForms(formsOf(value)) : [];
  // The new forms first: one the old value shares is never unregistered in between.
  add(forms, 1);
  if (previous && !(options.keepReplaced && value)) release(previous);
  if (forms.length > 0) slots.set(slot, forms);
  else slots.delete(slot);
}

/** How many forms are registered now (each value's spellings count apart): for tests of the registry's growth. */
export function registeredFormCount(): number {
  return known.size;
}

/** Registers the app key and secret, and the HTTP Basic credential made of them. */
export function registerAppCredentials(appKey: string | undefined, appSecret: string | undefined): void {
  registerSecrets(appKey, appSecret);
  if (appKey && appSecret) add(registryForms(basicFormsOf(appKey, appSecret)));
}

/**
 * `text` with every registered secret, and every value of `extra` (secrets of one request that are not
 * worth keeping, such as an authorization code), replaced by `[redacted]` in each of its forms.
 */
export function redact(text: string, extra: readonly (string | undefined)[] = []): string {
  let out = replaceKnown(text);
  for (const value of extra) {
    if (!value || value.length < MIN_EXTRA_LENGTH) continue;
    for (const form of formsOf(value)) if (form.length >= MIN_EXTRA_LENGTH) out = out.split(form).join(REDACTED);
  }
  return out;
}

/** `value` with `redact` applied to every string inside it (objects and arrays are copied, not changed). */
export function redactDeep<T>(value: T): T {
  if (typeof value === 'string') return redact(value) as T;
  if (Array.isArray(value)) return value.map((v: unknown) => redactDeep(v)) as T;
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactDeep(v)])) as T;
  }
  return value;
}
