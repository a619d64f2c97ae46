// `syncauth destination …`: destination connectors, where a workflow writes what it read. The service's per-type
// shapes are its own to check; secrets are masked in everything printed, as for source connectors.
import { ValidationError } from '../../errors.js';
import { DESTINATION_TYPES } from '../../service/constants.js';
import type { DestinationConnectorInformation } from '../../service/models.js';
import { maskSourceConfig } from '../../service/source-configs.js';
import type { CommandContext } from '../context.js';
import { confirmDeletion, readJsonObject, requireUuid } from '../input.js';
import { printJson, printRecord, printTable } from '../output.js';
import { withServiceClient } from '../service.js';

function masked(destination: DestinationConnectorInformation): DestinationConnectorInformation {
  return { ...destination, config: maskSourceConfig(destination.config) };
}

function show(context: CommandContext, destination: DestinationConnectorInformation): void {
  if (context.json) printJson(context.io, masked(destination));
  else printRecord(context.io, { ...masked(destination) });
}

function checkType(type: string): void {
  if (!(DESTINATION_TYPES as readonly string[]).includes(type)) {
    throw new ValidationError([{ field: '--type', message: `unknown type "${type}"; it must be one of: ${DESTINATION_TYPES.join(', ')}` }]);
  }
}

export async function listDestinations(context: CommandContext, options: { type?: string }): Promise<void> {
  if (options.type !== undefined) checkType(options.type);
  const destinations = await withServiceClient(context, (client) =>
    client.listDestinations(options.type === undefined ? {} : { destinationType: options.type }));
  if (context.json) {
    printJson(context.io, destinations.map(masked));
    return;
  }
  if (destinations.length === 0) {
    context.io.stderr.write('no destination connectors\n');
    return;
  }
  printTable(context.io, ['ID', 'NAME', 'TYPE', 'CREATED'], destinations.map((d) => [d.id, d.name, d.type, d.created_at]));
}

export async function showDestination(context: CommandContext, id: string): Promise<void> {
  requireUuid(id);
  show(context, await withServiceClient(context, (client) => client.getDestination(id)));
}

export async function createDestination(context: CommandContext, options: { type: string; name: string; config: string }): Promise<void> {
  checkType(options.type);
  const name = options.name.trim();
  if (!name) throw new ValidationError([{ field: '--name', message: 'must not be empty' }]);
  const config = await readJsonObject(options.config, '--config', context.stdin);
  const created = await withServiceClient(context, (client) => client.createDestination({ name, type: options.type, config }));
  if (!context.json) context.io.stderr.write(`created destination connector ${created.name} (${created.id})\n`);
  show(context, created);
}

export async function deleteDestination(context: CommandContext, id: string, options: { yes?: boolean }): Promise<void> {
  requireUuid(id);
  if (!(await confirmDeletion(context, `destination connector ${id}`, options.yes))) return;
  await withServiceClient(context, (client) => client.deleteDestination(id));
  context.io.stderr.write(`deleted destination connector ${id}\n`);
}
