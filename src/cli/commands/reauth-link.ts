// `syncauth reauth-link`: mints a re-authorization link for a profile and prints it alone on stdout. Like
// `token`, a command that prints a credential by design: whoever holds the link can give the profile a new
// grant (of the same Dropbox account, unless --allow-account-change). Only its digest is kept, in the config dir,
// where the daemon's page finds it (in Redis with --redis-url, where every replica's page does).
import { ExitCode, SyncauthError, ValidationError } from '../../errors.js';
import { openProfileStore } from '../../profile/index.js';
import { reauthorizeCommand } from '../../profile/name.js';
import { fileLinkStore, mintLink } from '../../reauth/links.js';
import type { CommandContext } from '../context.js';
import { requireGrantKey } from '../reauth.js';

export async function reauthLink(context: CommandContext, options: { allowAccountChange?: boolean } = {}): Promise<void> {
  const v = context.settings.values;
  if (!v.publicUrl) {
    throw new ValidationError([{ field: '--public-url', message: "is required (or SYNCAUTH_PUBLIC_URL): the https origin the daemon's re-authorization page is reached at" }]);
  }
  // With --redis-url the link goes to Redis, authenticated under SYNCAUTH_GRANT_KEY: checked before anything is read or written.
  const grantKey = v.redisUrl ? requireGrantKey(context, 'with --redis-url: the link is kept in Redis authenticated under it, as the replicas\' pages check it') : undefined;
  const name = v.profile;
  const state = await openProfileStore(v.configDir).read(name);
  if (!state) {
    throw new SyncauthError('SYNCAUTH_NO_PROFILE', `profile "${name}" has not been set up`, { exitCode: ExitCode.authRequired, hint: `run \`${reauthorizeCommand(name)}\`` });
  }
  const allowAccountChange = options.allowAccountChange === true;
  // With --redis-url the replicas' pages look links up in Redis: the link is kept there, not in this config dir.
  const redis = v.redisUrl ? await (await import('../../reauth/redis-store.js')).RedisReauthStore.open({ url: v.redisUrl, grantKey: grantKey as Buffer }) : undefined;
  let minted: { url: string; expiresAt: number };
  try {
    minted = await mintLink(redis?.links ?? fileLinkStore(v.configDir), { profile: name, publicUrl: v.publicUrl, ttlMs: v.reauthLinkTtl * 1000, allowAccountChange });
  } finally {
    await redis?.close();
  }
  const { url, expiresAt } = minted;
  context.io.stdout.write(`${url}\n`);
  const account = allowAccountChange
    ? 'it may move the profile to another Dropbox account'
    : state.accountId ? `only ${state.accountId} may approve it` : 'no account is recorded for the profile, so the page will ask for a link made with --allow-account-change';
  context.io.stderr.write(`a re-authorization link for profile "${name}", valid until ${new Date(expiresAt).toISOString()}; ${account}. Whoever holds it can re-authorize the profile: send it only to the Dropbox account's owner.\n`);
}
