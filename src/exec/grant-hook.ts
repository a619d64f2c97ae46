// `--on-reauthorized CMD`: the operator's command that puts a grant obtained by re-authorization where the
// next start reads it, for grants the daemon cannot write back itself (the env store: a Kubernetes Secret, a
// systemd credential). CMD is the operator's, from the daemon's own configuration; it runs under /bin/sh in a
// process group of its own, and gets the new grant on stdin only, as environment-file lines
// (`SYNCAUTH_APP_KEY=…`, `SYNCAUTH_APP_SECRET=…`, `SYNCAUTH_REFRESH_TOKEN=…`), the format of
// `kubectl create secret generic NAME --from-env-file=/dev/stdin` and of a systemd EnvironmentFile. Never in its
// argv (which every local user can read in /proc) and never in its environment (which its own children inherit):
// the environment is the daemon's less every secret (withoutSecrets), old grant and new alike, plus
// SYNCAUTH_PROFILE naming the profile. What it prints is kept (bounded), redacted, for the log. It has an
// overall deadline; past it, its whole group is ended.
import { spawn } from 'node:child_process';
import { redact } from '../redact.js';
import { withoutSecrets } from './env.js';

/** Default deadline of one run of the command. */
export const GRANT_HOOK_TIMEOUT_MS = 60_000;
/** After SIGTERM to the group on the deadline: when SIGKILL follows. */
const KILL_AFTER_MS = 5_000;
/** What is kept of the command's stdout and stderr together, for the log. */
const OUTPUT_LIMIT = 8 * 1024;

export interface HookGrant {
  appKey: string;
  appSecret: string;
  refreshToken: string;
}

export interface GrantHookOptions {
  /** The operator's command line, run with `/bin/sh -c`. */
  command: string;
  profile: string;
  grant: HookGrant;
  /** The environment to start from (the daemon's); every secret is taken out of it. */
  env: NodeJS.ProcessEnv;
  /** Further secrets the daemon holds (the old grant, API keys), kept out of the environment and the output. */
  secrets?: readonly (string | undefined)[];
  timeoutMs?: number;
}

export interface GrantHookResult {
  ok: boolean;
  /** Exit code, when the command exited. */
  exitCode?: number;
  /** The signal that ended it, when one did. */
  signal?: NodeJS.Signals;
  /** It outlasted its deadline and was ended. */
  timedOut: boolean;
  /** stdout and stderr interleaved, bounded, with every secret redacted. */
  output: string;
  /** Why it could not be started at all. */
  error?: string;
}

/** The environment-file text the command reads on stdin. */
export function grantEnvFile(grant: HookGrant): string {
  for (const value of [grant.appKey, grant.appSecret, grant.refreshToken]) {
    // Dropbox's keys and tokens never hold these; a value that did would break the file's lines.
    if (/[\r\n\0]/.test(value)) throw new RangeError('a grant value holds a line break');
  }
  return `SYNCAUTH_APP_KEY=${grant.appKey}\nSYNCAUTH_APP_SECRET=${grant.appSecret}\nSYNCAUTH_REFRESH_TOKEN=${grant.refreshToken}\n`;
}

export function runGrantHook(options: GrantHookOptions): Promise<GrantHookResult> {
  const secrets = [options.grant.appKey, options.grant.appSecret, options.grant.refreshToken, ...(options.secrets ?? [])].filter(
    (value): value is string => typeof value === 'string' && value.trim() !== '',
  );
  const env = { ...withoutSecrets(options.env, secrets), SYNCAUTH_PROFILE: options.profile };
  const input = grantEnvFile(options.grant);
  const timeoutMs = options.timeoutMs ?? GRANT_HOOK_TIMEOUT_MS;
  return new Promise<GrantHookResult>((resolve) => {
    let output = '';
    let timedOut = false;
    let settled = false;
    let killTimer: NodeJS.Timeout | undefined;
    const child = spawn('/bin/sh', ['-c', options.command], { env, detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
    const keep = (chunk: Buffer): void => {
      if (output.length < OUTPUT_LIMIT) output += chunk.toString('utf8').slice(0, OUTPUT_LIMIT - output.length);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    // A command that does not read its stdin closes the pipe: that is its business, not an error here.
    child.stdin.on('error', () => undefined);
    child.stdin.end(input);
    const group = (signal: NodeJS.Signals): void => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, signal);
      } catch {
        // The group is gone already.
      }
    };
    const deadline = setTimeout(() => {
      timedOut = true;
      group('SIGTERM');
      killTimer = setTimeout(() => group('SIGKILL'), KILL_AFTER_MS);
      killTimer.unref();
    }, timeoutMs);
    deadline.unref();
    const finish = (result: Omit<GrantHookResult, 'output' | 'timedOut'>): void => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      if (killTimer) clearTimeout(killTimer);
      resolve({ ...result, timedOut, output: redact(output, secrets).trim() });
    };
    child.on('error', (error) => finish({ ok: false, error: error.message }));
    let exited: Omit<GrantHookResult, 'output' | 'timedOut'> | undefined;
    child.on('exit', (code, signal) => {
      exited = { ok: code === 0 && !timedOut, ...(code !== null ? { exitCode: code } : {}), ...(signal ? { signal } : {}) };
      // What it left behind in its group goes with it, which also closes the pipes they held: no process holding
      // the grant outlives the run. One that left the group and keeps a pipe open is not waited for long.
      group('SIGKILL');
      const last = exited;
      setTimeout(() => finish(last), 1_000).unref();
    });
    child.on('close', () => {
      if (exited) finish(exited);
    });
  });
}
