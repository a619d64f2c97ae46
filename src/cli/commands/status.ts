// `syncauth status`: every profile at a glance; exit 4 when any needs re-authorization, so a script or a
// monitoring check can act on it.
import { ExitCode, SyncauthError } from '../../errors.js';
import { openProfileStore, type ProfileState } from '../../profile/index.js';
import type { CommandContext } from '../context.js';
import { printJson, printRecord } from '../output.js';

function relative(iso: string | undefined, now: number): string {
  if (!iso) return 'unknown';
  const seconds = Math.round((Date.parse(iso) - now) / 1000);
  const span = Math.abs(seconds);
  const text = span < 90 ? `${span}s` : span < 5400 ? `${Math.round(span / 60)}m` : `${(span / 3600).toFixed(1)}h`;
  return seconds >= 0 ? `${iso} (in ${text})` : `${iso} (expired ${text} ago)`;
}

function summary(state: ProfileState, now: number) {
  const expired = state.accessTokenExpiresAt ? Date.parse(state.accessTokenExpiresAt) <= now : undefined;
  return {
    profile: state.profile,
    state: state.needsReauthorization ? 'needs re-authorization' : state.lastError ? 'error' : 'ok',
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
  };
}

export async function status(context: CommandContext): Promise<void> {
  const { configDir, profile } = context.settings.values;
  const store = openProfileStore(configDir);
  const only = context.settings.sources.profile === 'default' ? undefined : profile;
  const states = only ? [await store.read(only)].filter((s): s is ProfileState => s !== undefined) : await store.list();
  const now = Date.now();
  if (only && states.length === 0) {
    throw new SyncauthError('SYNCAUTH_NO_PROFILE', `profile "${only}" has not been set up`, { exitCode: ExitCode.authRequired, hint: `run \`syncauth setup --profile ${only}\`` });
  }
  const rows = states.map((s) => summary(s, now));
  if (context.json) {
    printJson(context.io, { profiles: rows });
  } else if (rows.length === 0) {
    context.io.stdout.write('no profiles yet: run `syncauth setup` to create one\n');
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
      });
      if (row.needsReauthorization) context.io.stdout.write(`  → run \`syncauth setup --profile ${row.profile}\` to authorize again\n`);
    }
  }
  const stale = rows.filter((r) => r.needsReauthorization).map((r) => r.profile);
  if (stale.length > 0) {
    // Thrown, not set on process.exitCode: the entry point sets the exit code from its own result afterwards.
    throw new SyncauthError('SYNCAUTH_REAUTHORIZE', `${stale.length === 1 ? 'profile' : 'profiles'} ${stale.map((n) => `"${n}"`).join(', ')} need${stale.length === 1 ? 's' : ''} re-authorization`, {
      exitCode: ExitCode.authRequired,
      hint: stale.map((n) => `run \`syncauth setup --profile ${n}\``).join('; '),
    });
  }
}
