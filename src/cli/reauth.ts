// The re-authorization page's wiring for `syncauth daemon`: its settings checked with the others, its listener
// (src/reauth/server.ts, loaded only when asked for) joined to the running daemon, and each profile described to
// it from the profile's session (its state, its app credentials). Off unless --reauth-listen is given.
import { SETTINGS, type SettingName } from '../config.js';
import { parseGrantKey } from '../daemon/grant-record.js';
import type { DaemonGrant, RunningDaemon } from '../daemon/index.js';
import { absorbed, ValidationError, type FieldIssue } from '../errors.js';
import type { Logger } from '../log.js';
import type { FolderAccess } from '../oauth/index.js';
import type { LinkStore } from '../reauth/links.js';
import type { RoundStore } from '../reauth/redis-store.js';
import type { ReauthProfile } from '../reauth/server.js';
import type { CommandContext } from './context.js';
import { openSession, readSecrets, requireGrant } from './session.js';

/** Both or neither: a page without a public URL could not name its links, a URL without a page serves nothing. */
export function reauthSettingIssues(context: CommandContext, label: (name: SettingName) => string, notifying = false): FieldIssue[] {
  const v = context.settings.values;
  if (v.reauthListen && !v.publicUrl) return [{ field: label('reauthListen'), message: 'needs a public URL (--public-url or SYNCAUTH_PUBLIC_URL), the https origin people open the page at' }];
  if (v.publicUrl && !v.reauthListen) return [{ field: label('publicUrl'), message: 'needs the page\'s listen address (--reauth-listen or SYNCAUTH_REAUTH_LISTEN)' }];
  return grantSharingIssues(context, label, notifying);
}

/**
 * Replicas share a grant obtained by re-authorization only sealed, under SYNCAUTH_GRANT_KEY: with Redis and the
 * page both on, the key is required (a re-authorization on one replica would otherwise leave the others failing
 * with the revoked grant); a key without Redis has nothing to seal for. With Redis, the page's links and rounds
 * and the notices' outbox are authenticated (and a notice's link sealed) under subkeys of it, so the key is
 * required with the page or notices too. --on-reauthorized runs only after a re-authorization, which only the
 * page makes.
 */
function grantSharingIssues(context: CommandContext, label: (name: SettingName) => string, notifying: boolean): FieldIssue[] {
  const v = context.settings.values;
  const issues: FieldIssue[] = [];
  const grantKey = v.grantKey;
  if (grantKey !== undefined) {
    if (!v.redisUrl) issues.push({ field: label('grantKey'), message: 'is used only with --redis-url (SYNCAUTH_REDIS_URL): it seals the grant replicas share' });
    else absorbed(issues, () => parseGrantKey(grantKey, label('grantKey')).fill(0));
  } else if (v.redisUrl && v.reauthListen) {
    issues.push({
      field: label('grantKey'),
      message: 'is required with --redis-url and --reauth-listen: the grant a re-authorization brings is shared with the other replicas sealed under it, and the links in Redis are authenticated under it (32 random bytes in base64, the same on every replica, from the Secret)',
    });
  } else if (v.redisUrl && notifying) {
    issues.push({
      field: label('grantKey'),
      message: 'is required with --redis-url and --notify-url: the notices waiting in Redis are sealed under it, so Redis never holds a usable link (32 random bytes in base64, the same on every replica, from the Secret)',
    });
  }
  if (v.onReauthorized !== undefined && !v.reauthListen) issues.push({ field: label('onReauthorized'), message: 'needs the re-authorization page (--reauth-listen and --public-url): only it brings a new grant' });
  return issues;
}

/** The key sealing shared grants, when replicas share them (checked by reauthSettingIssues). */
export function grantKeyOf(context: CommandContext): Buffer | undefined {
  const v = context.settings.values;
  return v.grantKey !== undefined && v.redisUrl ? parseGrantKey(v.grantKey, SETTINGS.grantKey.env) : undefined;
}

/**
 * SYNCAUTH_GRANT_KEY for a command that reads or writes the page's records or the outbox in Redis: exit 2 naming
 * it when it is missing or malformed, before anything is sent or written.
 */
export function requireGrantKey(context: CommandContext, why = 'with --redis-url: the re-authorization links and the notices in Redis are authenticated under it'): Buffer {
  const v = context.settings.values;
  if (v.grantKey === undefined) {
    throw new ValidationError([{ field: SETTINGS.grantKey.env, message: `is required ${why} (32 random bytes in base64, the same as the replicas')` }]);
  }
  return parseGrantKey(v.grantKey, SETTINGS.grantKey.env);
}


/** Where the page's links and authorize rounds live: the config dir and memory, or Redis with --redis-url. */
export interface ReauthStores {
  links: LinkStore;
  /** Absent: the page keeps its rounds in memory. */
  rounds?: RoundStore;
  close(): Promise<void>;
}

/**
 * The stores of the page, when it is on: with --redis-url, Redis, so that a link minted by the replica that sent
 * the notice opens on any replica and an authorize round may come back to another; otherwise the config dir.
 */
export async function openReauthStores(context: CommandContext, log?: Logger): Promise<ReauthStores | undefined> {
  const v = context.settings.values;
  if (!v.reauthListen || !v.publicUrl) return undefined;
  if (v.redisUrl) {
    const { RedisReauthStore } = await import('../reauth/redis-store.js');
    const store = await RedisReauthStore.open({ url: v.redisUrl, grantKey: requireGrantKey(context), ...(log ? { logger: log } : {}) });
    return { links: store.links, rounds: store.rounds, close: () => store.close() };
  }
  const { fileLinkStore } = await import('../reauth/links.js');
  return { links: fileLinkStore(v.configDir), close: async () => undefined };
}

/** Starts the page when configured; returns what closes it. */
export async function startReauthPage(context: CommandContext, running: RunningDaemon, log: Logger, stores: ReauthStores | undefined): Promise<(() => Promise<void>) | undefined> {
  const v = context.settings.values;
  if (!v.reauthListen || !v.publicUrl || !stores) return undefined;
  const { startReauthServer } = await import('../reauth/server.js');
  const server = await startReauthServer({
    listen: v.reauthListen,
    publicUrl: v.publicUrl,
    links: stores.links,
    ...(stores.rounds ? { rounds: stores.rounds } : {}),
    profile: (name) => describeProfile(context, running, name),
    reauthorized: (name, grant) => running.reauthorized(name, grant),
    log,
  });
  return () => server.close();
}

async function describeProfile(context: CommandContext, running: RunningDaemon, name: string): Promise<ReauthProfile | undefined> {
  if (!running.status().profiles.some((profile) => profile.name === name)) return undefined;
  const session = await openSession(context, name);
  const grant = requireGrant(session, await readSecrets(session));
  const v = session.values;
  return {
    name,
    appKey: grant.appKey,
    appSecret: grant.appSecret,
    authorizeUrl: v.authorizeUrl,
    tokenUrl: v.tokenUrl,
    apiUrl: v.dropboxApiUrl,
    ...(v.remoteUrl ? { folder: v.remoteUrl } : {}),
    ...(session.state?.accountId ? { accountId: session.state.accountId } : {}),
    access: v.access as FolderAccess,
    // The env store cannot be written, but a grant record or --on-reauthorized keeps the new grant anyway.
    writable: session.secrets.writable || grantKeyOf(context) !== undefined || session.values.onReauthorized !== undefined,
  };
}

/**
 * What the daemon's notices call to put a link in a `profile.reauthorization_needed` notice: a fresh link per
 * ask, its digest stored (the config dir, or Redis with replicas) so it survives a restart. Undefined while the page is off.
 */
export async function reauthLinkFor(context: CommandContext, stores: ReauthStores | undefined): Promise<((profile: string) => Promise<{ url: string; expiresAt: number }>) | undefined> {
  const v = context.settings.values;
  if (!v.reauthListen || !v.publicUrl || !stores) return undefined;
  const { linkMinter } = await import('../reauth/links.js');
  const minter = linkMinter(stores.links, { publicUrl: v.publicUrl, ttlMs: v.reauthLinkTtl * 1000 });
  return (profile) => minter.linkFor(profile);
}

/**
 * --on-reauthorized: the operator's command, run with a new grant on stdin (src/exec/grant-hook.ts). Every
 * secret the daemon holds is kept out of its environment and its output; what it printed is logged, redacted.
 */
export function grantHook(context: CommandContext, command: string, log: Logger): (profile: string, grant: DaemonGrant) => Promise<{ ok: boolean; message?: string }> {
  const v = context.settings.values;
  return async (profile, grant) => {
    const { runGrantHook } = await import('../exec/grant-hook.js');
    const result = await runGrantHook({
      command,
      profile,
      grant,
      env: process.env,
      secrets: [v.appKey, v.appSecret, v.refreshToken, v.apiKey, v.notifySecret, v.grantKey, v.storeKey],
    });
    if (result.output) log.info({ profile, event: 'reauth.hook_output', op: 'reauth', output: result.output }, 'what the --on-reauthorized command printed');
    if (result.ok) return { ok: true };
    const why = result.error ?? (result.timedOut ? 'it did not finish in time and was ended' : result.signal ? `it was ended by ${result.signal}` : `it exited with code ${result.exitCode ?? '?'}`);
    return { ok: false, message: why };
  };
}
