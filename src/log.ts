// The one place where log output is shaped: pino with every secret-bearing field redacted, JSON lines for
// machines, a short human line when stdout is a terminal. Code that logs never has to remember what to hide.
import { createRequire } from 'node:module';
import type * as Pino from 'pino';
import type { DestinationStream, Level, LevelWithSilent, Logger } from 'pino';
import { redact, REDACTED } from './redact.js';

export type { Logger } from 'pino';

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const satisfies readonly LevelWithSilent[];

export type LogLevel = (typeof LOG_LEVELS)[number];

export { REDACTED };

// Field names that hold a secret wherever they appear, in both the wire spelling and ours.
const SECRET_FIELDS = [
  'authorization', 'cookie', 'refresh_token', 'access_token', 'token', 'app_secret', 'app_key', 'api_key',
  'client_secret', 'code_verifier', 'refreshToken', 'accessToken', 'appSecret', 'appKey', 'apiKey',
  'clientSecret', 'storeKey', 'store_key', 'password', 'secret', 'secrets', 'grant',
];
// Headers whose value is a credential; the service's key header has two names in the wild.
const SECRET_HEADERS = ['authorization', 'cookie', 'set-cookie', 'service-api-key', 'unstructured-api-key', 'proxy-authorization'];
// Whole values that are nothing but secrets or may carry them: connector configs, form and response bodies.
const SECRET_CONTAINERS = ['config', 'form', 'body'];
// An authorization code is single-use but still a credential until spent. Only at the top level: `err.code`
// and the like are our own error codes, which a reader needs.
const TOP_LEVEL_SECRETS = ['code'];

const lower = (names: readonly string[]) => new Set(names.map((name) => name.toLowerCase()));

/**
 * The censor of every logged object: a value under a secret field's name, a secret header (under any key
 * named `headers`) or a container is replaced by `[redacted]`, at any depth, names compared in any case. One
 * pass over the object, copying only the objects on the way to something it censors; the caller's object is
 * never changed. (pino's `redact` paths did this with ~90 wildcard paths, parsed and walked on every line:
 * most of a renewal's CPU, and it stopped three levels down.)
 */
function fieldCensor(extraHeaders: readonly string[]): { top: (value: Record<string, unknown>) => Record<string, unknown>; nested: (value: unknown) => unknown } {
  const fields = lower([...SECRET_FIELDS, ...SECRET_CONTAINERS]);
  const topFields = lower([...SECRET_FIELDS, ...SECRET_CONTAINERS, ...TOP_LEVEL_SECRETS]);
  const headers = lower([...SECRET_HEADERS, ...SECRET_FIELDS, ...extraHeaders]);
  // The objects being walked, to cut a cycle (printed as pino prints one) instead of following it forever.
  const path: object[] = [];

  const censorAny = (value: unknown): unknown =>
    value === null || typeof value !== 'object' || value instanceof Date || ArrayBuffer.isView(value) ? value : censorObject(value, fields);

  /** A [name, value] pair list or a flat name, value, … list, as some clients hold headers. */
  const censorHeaderList = (list: readonly unknown[]): unknown[] => {
    const out = list.map((item) => (Array.isArray(item) && typeof item[0] === 'string' && headers.has(item[0].toLowerCase()) ? [item[0], REDACTED] : censorAny(item)));
    for (let i = 0; i + 1 < out.length; i += 2) {
      const name = out[i];
      if (typeof name === 'string' && headers.has(name.toLowerCase())) out[i + 1] = REDACTED;
    }
    return out.every((item, i) => item === list[i]) ? (list as unknown[]) : out;
  };

  const censorHeaders = (value: unknown): unknown => {
    if (Array.isArray(value)) return censorHeaderList(value);
    return value !== null && typeof value === 'object' ? censorObject(value, headers) : value;
  };

  function censorObject(value: object, secret: ReadonlySet<string>, skip?: string): unknown {
    if (path.includes(value)) return '[Circular]';
    path.push(value);
    try {
      if (Array.isArray(value)) {
        let copy: unknown[] | undefined;
        for (let i = 0; i < value.length; i += 1) {
          const item: unknown = value[i];
          const censored = censorAny(item);
          if (censored !== item) (copy ??= [...value])[i] = censored;
        }
        return copy ?? value;
      }
      let copy: Record<string, unknown> | undefined;
      const source = value as Record<string, unknown>;
      for (const key in source) {
        if (!Object.hasOwn(source, key) || key === skip) continue;
        const item = source[key];
        if (item === undefined) continue;
        const name = key.toLowerCase();
        const censored = secret.has(name) ? REDACTED : name === 'headers' ? censorHeaders(item) : censorAny(item);
        if (censored === item) continue;
        // As pino's own redaction copied: same prototype (an error stays one), own enumerable fields.
        copy ??= Object.assign(Object.create(Object.getPrototypeOf(value) as object | null) as Record<string, unknown>, source);
        copy[key] = censored;
      }
      return copy ?? value;
    } finally {
      path.pop();
    }
  }

  return {
    // `err` is left to its serializer below, which pino runs after this: an Error copied here would lose the
    // message and stack that are not its own enumerable fields.
    top: (value) => censorObject(value, topFields, 'err') as Record<string, unknown>,
    nested: censorAny,
  };
}
export interface LoggerOptions {
  level?: LogLevel;
  /** Where lines go; default stdout. */
  destination?: DestinationStream;
  /** Human-readable lines instead of JSON; default: when the destination is stdout and stdout is a terminal. */
  pretty?: boolean;
  /** Header names that carry credentials besides the usual ones (a configured API key header). */
  secretHeaders?: readonly string[];
}

/** pino, loaded when the first logger is made: a command that only names the log levels never pays for it. */
const loadPino = (): typeof Pino.pino => (createRequire(import.meta.url)('pino') as typeof Pino).pino;

export function createLogger(options: LoggerOptions = {}): Logger {
  const pino = loadPino();
  const pretty = options.pretty ?? (options.destination === undefined && process.stdout.isTTY === true);
  const destination = options.destination ?? process.stdout;
  const censor = fieldCensor(options.secretHeaders ?? []);
  const logger = pino(
    {
      level: options.level ?? 'info',
      // Redaction by field name, for everything a line is made of: the logged object, and the error under
      // `err` once serialized (its fields, a cause that is no error, an AggregateError's errors)...
      formatters: { log: censor.top },
      serializers: { err: (error: unknown) => censor.nested(pino.stdSerializers.err(error as Error)) },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      // Field names catch the secrets a caller hands over knowingly; this catches every known secret value,
      // in any form, wherever it sits in the line (a message quoting a provider's answer, an error's text).
      hooks: { streamWrite: (line) => redact(line) },
    },
    pretty ? prettyStream(destination) : destination,
  );
  // ...and a child's bindings, which pino serializes once, when the child is made, past every formatter. Every
  // child (and its children) inherits this from the root.
  const child = logger.child as unknown as (this: Logger, bindings: Pino.Bindings, childOptions?: Pino.ChildLoggerOptions) => Logger;
  logger.child = function censoredChild(this: Logger, bindings: Pino.Bindings, childOptions?: Pino.ChildLoggerOptions) {
    return child.call(this, censor.top(bindings), childOptions);
  } as unknown as Logger['child'];
  return logger;
}

const LEVEL_NAMES: Record<number, Level> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };
const HIDDEN_KEYS = new Set(['level', 'time', 'pid', 'hostname', 'msg']);

/**
 * Renders pino's JSON lines (already redacted) as `12:00:00 INFO  message key=value`. pino-pretty would do
 * more, but a sidecar's terminal output is read rarely and only needs to be legible.
 */
export function prettyStream(out: DestinationStream): DestinationStream {
  return {
    write(line: string) {
      let record: Record<string, unknown>;
      try {
        record = JSON.parse(line) as Record<string, unknown>;
      } catch {
        out.write(line);
        return;
      }
      const time = typeof record.time === 'string' ? record.time.slice(11, 19) : '';
      const level = (LEVEL_NAMES[Number(record.level)] ?? 'info').toUpperCase().padEnd(5);
      const fields = Object.entries(record)
        .filter(([key]) => !HIDDEN_KEYS.has(key))
        .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`);
      out.write(`${time} ${level} ${String(record.msg ?? '')}${fields.length ? `  ${fields.join(' ')}` : ''}\n`);
    },
  };
}
