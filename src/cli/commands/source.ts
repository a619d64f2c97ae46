// `syncauth source …`: connectors of any of the 21 types. Everything is validated before a request is made.
import { syncauthCommand } from '../../profile/name.js';
import { SyncauthError, ValidationError, ExitCode } from '../../errors.js';
import type { ServiceClient } from '../../service/client.js';
import { SOURCE_TYPES, type ConnectionCheck, type SourceConnectorInformation } from '../../service/models.js';
import { maskSourceConfig, validateSourceConfig } from '../../service/source-configs.js';
import type { CommandContext } from '../context.js';
import { confirmDeletion, readJsonObject, requireUuid } from '../input.js';
import { printJson, printRecord, printTable, type Io } from '../output.js';
import { withServiceClient } from '../service.js';

function masked(source: SourceConnectorInformation): SourceConnectorInformation {
  return { ...source, config: maskSourceConfig(source.config) };
}

function show(context: CommandContext, source: SourceConnectorInformation): void {
  const view = masked(source);
  if (context.json) {
    printJson(context.io, view);
    return;
  }
  const { config, ...rest } = view;
  printRecord(context.io, { ...rest, config });
}

function checkType(type: string, field = '--type'): void {
  if (!(SOURCE_TYPES as readonly string[]).includes(type)) {
    throw new ValidationError([{ field, message: `unknown type "${type}"; it must be one of the 21 source types: ${SOURCE_TYPES.join(', ')}` }]);
  }
}

function checkConfig(type: string, config: Record<string, unknown>): void {
  const result = validateSourceConfig(type, config);
  if (!result.ok) throw new ValidationError(result.issues);
}

export async function createSource(context: CommandContext, options: { type: string; name: string; config: string }): Promise<void> {
  checkType(options.type);
  const name = options.name.trim();
  if (!name) throw new ValidationError([{ field: '--name', message: 'must not be empty' }]);
  const config = await readJsonObject(options.config, '--config', context.stdin);
  checkConfig(options.type, config);
  const created = await withServiceClient(context, (client) => client.createSourceUntyped({ name, type: options.type, config }));
  if (!context.json) context.io.stderr.write(`created source connector ${created.name} (${created.id})\n`);
  show(context, created);
}

export async function getSource(context: CommandContext, id: string): Promise<void> {
  requireUuid(id);
  show(context, await withServiceClient(context, (client) => client.getSource(id)));
}

export async function listSources(context: CommandContext, options: { type?: string }): Promise<void> {
  if (options.type !== undefined) checkType(options.type);
  const sources = await withServiceClient(context, (client) =>
    client.listSources(options.type === undefined ? {} : { sourceType: options.type }),
  );
  if (context.json) {
    printJson(context.io, sources.map(masked));
    return;
  }
  if (sources.length === 0) {
    context.io.stderr.write('no source connectors\n');
    return;
  }
  printTable(context.io, ['ID', 'NAME', 'TYPE', 'CREATED'], sources.map((s) => [s.id, s.name, s.type, s.created_at]));
}

export async function updateSource(context: CommandContext, id: string, options: { config: string; type?: string }): Promise<void> {
  requireUuid(id);
  if (options.type !== undefined) checkType(options.type);
  const config = await readJsonObject(options.config, '--config', context.stdin);
  if (options.type !== undefined) checkConfig(options.type, config);
  const updated = await withServiceClient(context, async (client) => {
    // The config is validated for the connector's own type; reading it first sends nothing that changes state.
    const type = options.type ?? (await client.getSource(id)).type;
    checkConfig(type, config);
    return client.updateSourceUntyped(id, config, type);
  });
  if (!context.json) context.io.stderr.write(`updated source connector ${updated.name} (${updated.id})\n`);
  show(context, updated);
}

export async function deleteSource(context: CommandContext, id: string, options: { yes?: boolean }): Promise<void> {
  requireUuid(id);
  if (!(await confirmDeletion(context, `source connector ${id}`, options.yes))) return;
  await withServiceClient(context, (client) => client.deleteSource(id));
  context.io.stderr.write(`deleted source connector ${id}\n`);
}

/** Seconds a connection check may take before the command gives up waiting (the check itself goes on). */
const CHECK_TIMEOUT_SECONDS = 120;

export interface CheckOutcome {
  check: ConnectionCheck;
  ok: boolean;
}

/**
 * Runs the service's connection check of a connector and waits for its result, saying on stderr what it waits
 * for. Shared with `setup`, which runs it after creating the connector.
 */
export async function runConnectionCheck(client: ServiceClient, id: string, io: Io, options: { timeoutMs?: number; intervalMs?: number } = {}): Promise<CheckOutcome> {
  io.stderr.write(`checking that the service can use source connector ${id}…\n`);
  const check = await client.runSourceConnectionCheck(id, {
    timeoutMs: options.timeoutMs ?? CHECK_TIMEOUT_SECONDS * 1000,
    ...(options.intervalMs === undefined ? {} : { intervalMs: options.intervalMs }),
  });
  return { check, ok: check.status === 'SUCCESS' };
}

/** The failure of a check as an error that says what to do next. */
export function checkFailure(id: string, check: ConnectionCheck, fixHint?: string): SyncauthError {
  const reason = check.reason?.trim() || `the check ended ${check.status} without a reason`;
  const again = `\`${syncauthCommand(`source check ${id}`)}\``;
  const reauthorize = `authorize again with \`${syncauthCommand('setup')}\`, or the link the daemon sent (its re-authorization page)`;
  // A revoked grant: no renewal can help, only a person authorizing again. A refused access token may be a
  // revoked grant's too (Dropbox does not say), or merely an old one that a renewal replaces.
  const hint = fixHint ??
    (/invalid_grant|revoked/i.test(reason)
      ? `the Dropbox grant was revoked: ${reauthorize}; then run ${again}`
      : /invalid_access_token|expired_access_token|token|invalid_client/i.test(reason)
        ? `if the Dropbox grant was revoked (\`${syncauthCommand('status')}\` says so), ${reauthorize}; otherwise \`${syncauthCommand('refresh')}\` gives the connector a fresh token; then run ${again}`
        : `fix the connector's config with \`${syncauthCommand(`source update ${id} --config FILE`)}\`, then run ${again}`);
  return new SyncauthError('SYNCAUTH_CHECK_FAILED', `the service could not use source connector ${id}: ${reason}`, { exitCode: ExitCode.error, hint });
}

export async function checkSource(context: CommandContext, id: string): Promise<void> {
  requireUuid(id);
  const outcome = await withServiceClient(context, (client) => runConnectionCheck(client, id, context.io));
  const { check } = outcome;
  if (context.json) printJson(context.io, { id: check.id, status: check.status, reason: check.reason ?? null, created_at: check.created_at, reported_at: check.reported_at ?? null });
  else if (outcome.ok) context.io.stdout.write(`✓ connection check passed for source connector ${id} (check ${check.id}${check.reported_at ? `, ${check.reported_at}` : ''})\n`);
  if (!outcome.ok) throw checkFailure(id, check);
}

