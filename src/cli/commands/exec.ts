// `syncauth exec -- CMD ARGS…`: runs CMD with a fresh access token in its environment, as HashiCorp Vault's process
// supervisor does. The token comes from sessionAccessToken, exactly as `syncauth token` gets it (the same
// single flight, profile lock and kept token); the connector is not reconciled. Every flag is checked before
// any token is asked for. With --watch the token is renewed inside the margin and the child is restarted with
// it, or sent --signal to re-read a template.
//
// Signals: before the child runs, SIGINT and SIGTERM end exec as they end `syncauth token` (130/143, never in
// the middle of a secret-store write) and the others are ignored. Once it runs, SIGINT, SIGTERM, SIGHUP,
// SIGQUIT, SIGUSR1 and SIGUSR2 are forwarded to it (SIGINT and SIGTERM to its descendants too) and exec exits
// with its code once it and every process it started have ended (see src/exec/child.ts).
import { SECRET_SETTINGS, SETTINGS } from '../../config.js';
import { SyncauthError, ValidationError, type FieldIssue } from '../../errors.js';
import { ChildSupervisor, SpawnFailure } from '../../exec/child.js';
import { checkEnvName, checkPassEnvName, childEnvironment, DEFAULT_TOKEN_ENV, rfc3339, type ChildToken } from '../../exec/env.js';
import { FORWARDED_SIGNALS, isStopSignal, parseSignal } from '../../exec/signals.js';
import { watchToken, type TokenWatch } from '../../exec/watch.js';
import { createLogger, type LogLevel } from '../../log.js';
import { getCurrentAccount } from '../../oauth/index.js';
import { tokenFileFor } from '../../publish/place.js';
import { SinkLocks } from '../../publish/sink-lock.js';
import { ACCOUNT_ID_TIMEOUT_MS, checkTemplate, parseTemplateFlag, TemplateRenderer, templatesUse, type TemplateSpec } from '../../publish/index.js';
import { redact } from '../../redact.js';
import type { CommandContext } from '../context.js';
import { handleSignals } from '../interrupt.js';
import { openSession, readSecrets, requireGrant, type ProfileSession } from '../session.js';
import { sessionAccessToken, type SessionToken } from './shared.js';

export interface ExecCommandOptions {
  envName?: string;
  watch?: boolean;
  signal?: string;
  killTimeout?: string;
  template?: string[];
  cleanEnv?: boolean;
  passEnv?: string[];
}

interface ExecPlan {
  command: string;
  args: string[];
  envName: string;
  watch: boolean;
  /** With --watch: signal the child instead of restarting it. */
  signal: NodeJS.Signals | undefined;
  /** After the first signal that ends the child's tree: when to SIGKILL what still runs (0: never). */
  killTimeoutMs: number;
  templates: TemplateSpec[];
  /** --clean-env: only PATH, HOME, LANG, TZ and the --pass-env names reach the child. */
  cleanEnv: boolean;
  passEnv: string[];
}

type Grant = ReturnType<typeof requireGrant>;

const DEFAULT_KILL_TIMEOUT_SECONDS = 10;
const MAX_KILL_TIMEOUT_SECONDS = 3_600;
/** At exit, how long a renewal under way may take to finish storing what it got. */
const SETTLE_MS = 5_000;

const LEVELS: Record<string, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60, silent: Infinity };
type StatusLevel = 'info' | 'warn' | 'error';

/**
 * Checks every flag, reporting all problems at once. `argv` is the process's own: the command must follow
 * a `--`, so that its options are never taken for exec's.
 */
async function plan(context: CommandContext, command: string[], options: ExecCommandOptions, argv: readonly string[]): Promise<ExecPlan> {
  const issues: FieldIssue[] = [];
  const attempt = <T>(work: () => T): T | undefined => {
    try {
      return work();
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      issues.push(...error.issues);
      return undefined;
    }
  };
  const dashes = argv.indexOf('--');
  const after = dashes === -1 ? [] : argv.slice(dashes + 1);
  if (command.length === 0 || dashes === -1 || after.length !== command.length || after.some((arg, i) => arg !== command[i])) {
    issues.push({ field: '', message: 'a command is needed after `--`: syncauth exec [options] -- CMD [ARGS…]' });
  }
  const envName = attempt(() => checkEnvName(options.envName ?? DEFAULT_TOKEN_ENV, '--env-name')) ?? DEFAULT_TOKEN_ENV;
  const watch = options.watch === true;
  let signal: NodeJS.Signals | undefined;
  if (options.signal !== undefined) {
    signal = attempt(() => parseSignal(options.signal as string, '--signal'));
    if (!watch) issues.push({ field: '--signal', message: 'only applies with --watch (it tells the child about a renewed token)' });
  }
  let killTimeoutMs = DEFAULT_KILL_TIMEOUT_SECONDS * 1000;
  if (options.killTimeout !== undefined) {
    const raw = options.killTimeout.trim();
    const seconds = Number(raw);
    if (!/^\d+(\.\d+)?$/.test(raw) || seconds > MAX_KILL_TIMEOUT_SECONDS) {
      issues.push({ field: '--kill-timeout', message: `must be a number of seconds from 0 to ${MAX_KILL_TIMEOUT_SECONDS}, like 10 or 2.5` });
    } else {
      killTimeoutMs = Math.round(seconds * 1000);
    }
  }
  const cleanEnv = options.cleanEnv === true;
  const passEnv: string[] = [];
  for (const raw of options.passEnv ?? []) {
    const name = attempt(() => checkPassEnvName(raw, '--pass-env'));
    if (name !== undefined) passEnv.push(name);
  }
  if (passEnv.length > 0 && !cleanEnv) {
    issues.push({ field: '--pass-env', message: 'only applies with --clean-env (without it every variable that holds no secret is passed)' });
  }
  const templates: TemplateSpec[] = [];
  for (const raw of options.template ?? []) {
    const spec = attempt(() => parseTemplateFlag(raw, '--template'));
    if (!spec) continue;
    try {
      await checkTemplate(spec, [context.settings.values.profile], '--template');
      templates.push(spec);
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      issues.push(...error.issues);
    }
  }
  if (issues.length > 0) throw new ValidationError(issues);
  const [first, ...args] = command as [string, ...string[]];
  return { command: first, args, envName, watch, signal, killTimeoutMs, templates, cleanEnv, passEnv };
}

/**
 * Until the child runs: SIGINT and SIGTERM as for `syncauth token` (interrupt.ts: exit 130/143 at once, or when
 * a secret-store write ends), the other forwarded signals ignored. Returns what takes those handlers away.
 */
function signalsBeforeStart(say: (level: StatusLevel, line: string) => void): () => void {
  const release = handleSignals('exit');
  const ignore = (signal: NodeJS.Signals): void => say('info', `${signal} before the child started: ignored`);
  const ignored = FORWARDED_SIGNALS.filter((signal) => !isStopSignal(signal));
  for (const signal of ignored) process.on(signal, ignore);
  return () => {
    release();
    for (const signal of ignored) process.off(signal, ignore);
  };
}

export async function exec(
  context: CommandContext,
  command: string[] = [],
  options: ExecCommandOptions = {},
  argv: readonly string[] = process.argv,
): Promise<void> {
  const { stderr } = context.io;
  const threshold = LEVELS[context.settings.values.logLevel] ?? LEVELS.info;
  const say = (level: StatusLevel, line: string): void => {
    if ((LEVELS[level] ?? 0) >= (threshold ?? 0)) stderr.write(`syncauth exec: ${redact(line)}\n`);
  };

  const settings = await plan(context, command, options, argv);
  // The templates' destinations are this run's alone before any token is asked for: one another running
  // process holds (a daemon, another exec) refuses the run with exit 2, naming it (src/publish/sink-lock.ts).
  const locks = settings.templates.length > 0 ? new SinkLocks() : undefined;
  await locks?.take([...new Set(settings.templates.map((spec) => tokenFileFor(spec.dest, context.settings.values.profile)))].map((dest) => ({ path: dest, field: '--template' })));
  const stopEarlySignals = signalsBeforeStart(say);

  // Every secret in play, so that no variable carrying one (under any name) reaches the child.
  const secrets = new Set<string | undefined>([context.settings.values.storeKey]);
  for (const name of SECRET_SETTINGS) secrets.add(context.inputs.env?.[SETTINGS[name].env]).add(context.inputs.dotenv?.[SETTINGS[name].env]);
  const grantOf = async (session: ProfileSession): Promise<Grant> => {
    const read = await readSecrets(session);
    const grant = requireGrant(session, read);
    for (const value of [grant.appKey, grant.appSecret, grant.refreshToken, read.apiKey]) secrets.add(value);
    return grant;
  };
  const session = await openSession(context, undefined, { existing: true });
  const profile = session.name;
  const baseEnv = { ...process.env };
  const withheldSaid = new Set<string>();
  const envFor = (token: ChildToken): Record<string, string> =>
    childEnvironment(baseEnv, secrets, settings.envName, token, {
      clean: settings.cleanEnv,
      pass: settings.passEnv,
      withheld: (name) => {
        if (withheldSaid.has(name)) return;
        withheldSaid.add(name);
        say('warn', `--pass-env ${name}: not passed, its value holds a secret`);
      },
    });

  let accountId: string | undefined;
  const tokenOf = (token: SessionToken): ChildToken => {
    // A renewal's answer may name the account (a kept token does not): templates may use it.
    if ('accountId' in token && typeof token.accountId === 'string') accountId = token.accountId;
    return { accessToken: token.accessToken, expiresAt: token.expiresAt };
  };
  const first = tokenOf(await sessionAccessToken(session, await grantOf(session), 'margin'));

  // Learnt from the account endpoint only when a template uses it; a failure is said and tried at the next render.
  const wantsAccountId = await templatesUse(settings.templates, 'account_id');
  const learnAccountId = async (accessToken: string): Promise<void> => {
    if (accountId || !wantsAccountId) return;
    try {
      accountId = (await getCurrentAccount({ apiUrl: session.values.dropboxApiUrl, accessToken, timeoutMs: ACCOUNT_ID_TIMEOUT_MS })).accountId;
    } catch (error) {
      say('warn', `could not learn the Dropbox account id for the templates: ${error instanceof Error ? error.message : String(error)}`);
    }
  };

  let failedRenders = 0;
  const renderer = settings.templates.length > 0 ? new TemplateRenderer(settings.templates, templateLogger(context, say, () => failedRenders++), locks) : undefined;
  const render = async (token: ChildToken): Promise<boolean> => {
    if (!renderer) return true;
    await learnAccountId(token.accessToken);
    const failedBefore = failedRenders;
    await renderer.render({ ...token, profile, now: Date.now(), ...(accountId ? { accountId } : {}) });
    return failedRenders === failedBefore;
  };
  if (!(await render(first))) {
    await locks?.release().catch(() => undefined);
    throw new SyncauthError('SYNCAUTH_TEMPLATE_FAILED', 'a template could not be rendered (see above), so the command was not started', {
      hint: 'fix the template or its destination and run again',
    });
  }

  const supervisor = new ChildSupervisor({
    command: settings.command,
    args: settings.args,
    killTimeoutMs: settings.killTimeoutMs,
    say,
  });
  // Handed over in one go, so that no signal finds neither set of handlers. A stop signal that comes while
  // the child is being started is sent to it once it runs.
  stopEarlySignals();
  for (const signal of FORWARDED_SIGNALS) process.on(signal, () => supervisor.forward(signal, isStopSignal(signal)));
  try {
    await supervisor.start(envFor(first));
  } catch (error) {
    if (!(error instanceof SpawnFailure)) throw error;
    say('error', error.message);
    await locks?.release().catch(() => undefined);
    process.exit(error.exitCode);
  }

  let watch: TokenWatch | undefined;
  if (settings.watch) {
    watch = watchToken({
      initial: first,
      marginMs: session.values.renewMargin * 1000,
      active: () => !supervisor.stopping,
      say,
      renew: async () => {
        // Read again each time: `setup` may have stored a new grant, or another process a rotated token.
        const fresh = await openSession(context);
        return tokenOf(await sessionAccessToken(fresh, await grantOf(fresh), 'margin'));
      },
      onToken: async (token) => {
        const rendered = await render(token);
        const expires = `expires ${rfc3339(token.expiresAt)}`;
        if (settings.signal) {
          if (!rendered) say('warn', `a template was not rendered; sending ${settings.signal} all the same`);
          if (supervisor.notify(settings.signal)) say('info', `token renewed (${expires}): sent ${settings.signal} to the child (pid ${supervisor.pid})`);
        } else {
          say('info', `token renewed (${expires}): restarting the child`);
          supervisor.restart(envFor(token));
        }
      },
    });
  }

  const code = await supervisor.done;
  if (watch) await Promise.race([watch.stop(), new Promise((resolve) => setTimeout(resolve, SETTLE_MS).unref())]);
  await locks?.release().catch(() => undefined);
  process.exit(code);
}

/**
 * The renderer's logger: its JSON lines become `syncauth exec:` status lines, and a failed render is counted
 * (the renderer never throws; the first render must succeed for the child to start).
 */
function templateLogger(context: CommandContext, say: (level: StatusLevel, line: string) => void, failed: () => void) {
  return createLogger({
    level: context.settings.values.logLevel as LogLevel,
    pretty: false,
    destination: {
      write(line: string) {
        let record: Record<string, unknown>;
        try {
          record = JSON.parse(line) as Record<string, unknown>;
        } catch {
          return;
        }
        if (record.event === 'template.failed') failed();
        const level: StatusLevel = typeof record.level === 'number' && record.level >= 50 ? 'error' : typeof record.level === 'number' && record.level >= 40 ? 'warn' : 'info';
        const detail = [record.error, record.template && `template ${String(record.template)}`, record.dest && `file ${String(record.dest)}`].filter(Boolean);
        say(level, `${String(record.msg)}${detail.length > 0 ? ` (${detail.map(String).join('; ')})` : ''}`);
      },
    },
  });
}
