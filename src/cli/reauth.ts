// The re-authorization page's wiring for `syncauth daemon`: its settings checked with the others, its listener
// (src/reauth/server.ts, loaded only when asked for) joined to the running daemon, and each profile described to
// it from the profile's session (its state, its app credentials). Off unless --reauth-listen is given.
import type { SettingName } from '../config.js';
import type { RunningDaemon } from '../daemon/index.js';
import type { FieldIssue } from '../errors.js';
import type { Logger } from '../log.js';
import type { FolderAccess } from '../oauth/index.js';
import type { ReauthProfile } from '../reauth/server.js';
import type { CommandContext } from './context.js';
import { openSession, readSecrets, requireGrant } from './session.js';

/** Both or neither: a page without a public URL could not name its links, a URL without a page serves nothing. */
export function reauthSettingIssues(context: CommandContext, label: (name: SettingName) => string): FieldIssue[] {
  const v = context.settings.values;
  if (v.reauthListen && !v.publicUrl) return [{ field: label('reauthListen'), message: 'needs a public URL (--public-url or SYNCAUTH_PUBLIC_URL), the https origin people open the page at' }];
  if (v.publicUrl && !v.reauthListen) return [{ field: label('publicUrl'), message: 'needs the page\'s listen address (--reauth-listen or SYNCAUTH_REAUTH_LISTEN)' }];
  return [];
}

/** Starts the page when configured; returns what closes it. */
export async function startReauthPage(context: CommandContext, running: RunningDaemon, log: Logger): Promise<(() => Promise<void>) | undefined> {
  const v = context.settings.values;
  if (!v.reauthListen || !v.publicUrl) return undefined;
  const [{ startReauthServer }, { fileLinkStore }] = await Promise.all([import('../reauth/server.js'), import('../reauth/links.js')]);
  const server = await startReauthServer({
    listen: v.reauthListen,
    publicUrl: v.publicUrl,
    links: fileLinkStore(v.configDir),
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
    writable: session.secrets.writable,
  };
}

/**
 * What the daemon's notices call to put a link in a `profile.reauthorization_needed` notice: a fresh link per
 * ask, its digest stored in the config dir so it survives a restart. Undefined while the page is off.
 */
export async function reauthLinkFor(context: CommandContext): Promise<((profile: string) => Promise<{ url: string; expiresAt: number }>) | undefined> {
  const v = context.settings.values;
  if (!v.reauthListen || !v.publicUrl) return undefined;
  const { fileLinkStore, linkMinter } = await import('../reauth/links.js');
  const minter = linkMinter(fileLinkStore(v.configDir), { publicUrl: v.publicUrl, ttlMs: v.reauthLinkTtl * 1000 });
  return (profile) => minter.linkFor(profile);
}
