// `syncauth status`: every profile at a glance; exit 4 when any needs re-authorization, 1 when any is incomplete or
// failed its last renewal or reconcile, so a script or a monitoring check can act on it.
import { resolveSettings } from '../../config.js';
import { ExitCode, SyncauthError } from '../../errors.js';
import { openSecretStore } from '../../credentials/index.js';
import { openProfileStore, type ProfileState, type ProfileStore } from '../../profile/index.js';
import { reauthorizeCommand, syncauthCommand } from '../../profile/name.js';
import { pendingSetups, recoverInterruptedSetup } from '../../sync/setup-journal.js';
import type { CommandContext } from '../context.js';
import { printJson, printRecord } from '../output.js';
import { requireGrantKey } from '../reauth.js';

function relative(iso: string | undefined, now: number): string {
  if (!iso) return 'unknown';
  const seconds = Math.round((Date.parse(iso) - now) / 1000);
  const span = Math.abs(seconds);
  const text = span < 90 ? `${span}s` : span < 5400 ? `${Math.round(span / 60)}m` : `${(span / 3600).toFixed(1)}h`;
  return seconds >= 0 ? `${iso} (in ${text})` : `${iso} (expired ${text} ago)`;
}

interface Trouble {
  state: 'needs re-authorization' | 'incomplete' | 'error';
  /** Completes `profile "NAME" …` in the error message. */
  summary: string;
  /** The line under the profile in the text output, naming the fix. */
  advice: string;
  fix: string;
}

/**
 * What is wrong with a profile and the command that fixes it, or undefined when nothing is. An expired access
 * token is not trouble: the next `token`, `refresh` or the daemon renews it.
 */
function troubleOf(state: ProfileState): Trouble | undefined {
  const setupFix = reauthorizeCommand(state.profile);
  const refreshFix = syncauthCommand(`refresh --profile ${state.profile}`);
  if (state.needsReauthorization) {
    return { state: 'needs re-authorization', summary: 'needs re-authorization', advice: `run \`${setupFix}\` to authorize again`, fix: setupFix };
  }
  if (!state.lastError) return undefined;
  if (state.lastError.code === 'SYNCAUTH_SETUP_UNFINISHED') {
    return {
      state: 'incomplete', summary: 'is incomplete',
      advice: `setup stopped before the source connector was made: run \`${refreshFix}\` to finish it`, fix: refreshFix,
    };
  }
  // A terminal failure is a setting (app key or secret, permissions) that retrying alone will not fix.
  if (state.lastError.terminal) {
    return {
      state: 'error', summary: 'failed its last renewal or connector update',
      advice: `the last renewal or connector update failed on a setting retrying will not fix: run \`${setupFix}\` to correct it`, fix: setupFix,
    };
  }
  return {
    state: 'error', summary: 'failed its last renewal or connector update',
    advice: `the last renewal or connector update failed: run \`${refreshFix}\` to try again`, fix: refreshFix,
  };
}

function summary(state: ProfileState, trouble: Trouble | undefined, now: number, link: { expiresAt: number } | undefined) {
  const expired = state.accessTokenExpiresAt ? Date.parse(state.accessTokenExpiresAt) <= now : undefined;
  return {
    profile: state.profile,
    state: trouble?.state ?? 'ok',
    /** The command that fixes what `state` says is wrong. */
    fix: trouble?.fix ?? null,
    needsReauthorization: state.needsReauthorization === true,
    baseUrl: state.baseUrl ?? null,
    remoteUrl: state.remoteUrl ?? null,
    connector: state.connectorId ? { id: state.connectorId, name: state.connectorName ?? null } : null,
    workflowId: state.workflowId ?? null,
    schedule: state.schedule ?? null,
    accessTokenExpiresAt: state.accessTokenExpiresAt ?? null,
    accessTokenExpired: expired ?? null,
    lastRenewalAt: state.lastRenewalAt ?? null,
    lastError: state.lastError ?? null,
    /** A re-authorization link is outstanding (never the link itself). */
    reauthorizationLink: link ? { expiresAt: new Date(link.expiresAt).toISOString() } : null,
  };
}

/**
 * The latest-expiring outstanding re-authorization link of each profile; none when the links cannot be read. With
 * --redis-url (replicas), the links are in Redis, where the replicas' pages keep them.
 */
async function outstandingLinks(configDir: string, redis: { url: string; grantKey: Buffer } | undefined, names: string[], now: number): Promise<Map<string, { expiresAt: number }>> {
  const found = new Map<string, { expiresAt: number }>();
  if (names.length === 0) return found;
  const { fileLinkStore } = await import('../../reauth/links.js');
  const store = redis ? await (await import('../../reauth/redis-store.js')).RedisReauthStore.open({ url: redis.url, grantKey: redis.grantKey }).catch(() => undefined) : undefined;
  try {
    const links = store?.links ?? fileLinkStore(configDir);
    for (const name of names) {
      const open = await links.outstanding(name, now).catch(() => []);
      const latest = open.reduce<{ expiresAt: number } | undefined>((best, link) => (!best || link.expiresAt > best.expiresAt ? link : best), undefined);
      if (latest) found.set(name, latest);
    }
  } finally {
    await store?.close();
  }
  return found;
}

/**
 * Setups killed between their writes are finished or undone first, so that the list shows what is really there,
 * each in the secret store its profile uses (the one config.json records for it, unless a flag or the
 * environment says otherwise). One that cannot be checked (its secret store does not open) is said, and the
 * listing goes on.
 */
async function recoverSetups(context: CommandContext, store: ProfileStore, only: string | undefined): Promise<void> {
  const pending = (await pendingSetups(store)).filter((name) => !only || name === only);
  if (pending.length === 0) return;
  const say = (line: string) => context.io.stderr.write(`syncauth: ${line}\n`);
  for (const name of pending) {
    try {
      const { configDir, store: kind, storeKey } = resolveSettings({ ...context.inputs, flags: { ...context.inputs.flags, profile: name } }).values;
      const secrets = openSecretStore({ kind, configDir, env: context.inputs.env, ...(storeKey ? { storeKey } : {}) });
      await recoverInterruptedSetup(store, secrets, name, say);
    } catch (error) {
      say(`profile "${name}": an interrupted setup could not be checked: ${(error as Error).message}`);
    }
  }
}

export async function status(context: CommandContext): Promise<void> {
  const { configDir, profile, redisUrl } = context.settings.values;
  // The links in Redis are authenticated under SYNCAUTH_GRANT_KEY: without it, exit 2 before anything is read or written.
  const redis = redisUrl ? { url: redisUrl, grantKey: requireGrantKey(context, 'with --redis-url: the links in Redis are authenticated under it, and status reads them there') } : undefined;
  const store = openProfileStore(configDir);
  const only = context.settings.sources.profile === 'default' ? undefined : profile;
  await recoverSetups(context, store, only);
  const states = only ? [await store.read(only)].filter((s): s is ProfileState => s !== undefined) : await store.list();
  const now = Date.now();
  if (only && states.length === 0) {
    throw new SyncauthError('SYNCAUTH_NO_PROFILE', `profile "${only}" has not been set up`, { exitCode: ExitCode.authRequired, hint: `run \`${reauthorizeCommand(only)}\`` });
  }
  const troubles = states.map(troubleOf);
  const links = await outstandingLinks(configDir, redis, states.map((s) => s.profile), now);
  const rows = states.map((s, i) => summary(s, troubles[i], now, links.get(s.profile)));
  if (context.json) {
    printJson(context.io, { profiles: rows });
  } else if (rows.length === 0) {
    context.io.stdout.write(`no profiles yet: run \`${syncauthCommand('setup')}\` to create one\n`);
  } else {
    for (const [i, s] of states.entries()) {
      const row = rows[i] as ReturnType<typeof summary>;
      if (i > 0) context.io.stdout.write('\n');
      printRecord(context.io, {
        profile: row.profile,
        state: row.state,
        service: row.baseUrl,
        folder: row.remoteUrl,
        connector: row.connector ? `${row.connector.name ?? ''} (${row.connector.id})` : null,
        workflow: row.workflowId ? `${row.workflowId}${row.schedule ? `, ${row.schedule}` : ''}` : null,
        'token expires': relative(s.accessTokenExpiresAt, now),
        'last renewal': s.lastRenewalAt ?? null,
        'last error': s.lastError ? `${s.lastError.code}: ${s.lastError.message} (${s.lastError.at})` : null,
        ...(row.reauthorizationLink ? { 'reauthorization link': `outstanding, expires ${relative(row.reauthorizationLink.expiresAt, now)}` } : {}),
      });
      const advice = troubles[i]?.advice;
      if (advice) context.io.stdout.write(`  → ${advice}\n`);
    }
  }
  const troubled = states.flatMap((s, i) => {
    const trouble = troubles[i];
    return trouble ? [{ profile: s.profile, ...trouble }] : [];
  });
  if (troubled.length > 0) {
    const reauthorize = troubled.some((t) => t.state === 'needs re-authorization');
    // Thrown, not set on process.exitCode: the entry point sets the exit code from its own result afterwards.
    throw new SyncauthError(
      reauthorize ? 'SYNCAUTH_REAUTHORIZE' : 'SYNCAUTH_PROFILE_FAILING',
      troubled.map((t) => `profile "${t.profile}" ${t.summary}`).join('; '),
      { exitCode: reauthorize ? ExitCode.authRequired : ExitCode.error, hint: troubled.map((t) => `run \`${t.fix}\``).join('; ') },
    );
  }
}
