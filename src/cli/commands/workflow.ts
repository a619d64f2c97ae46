// `syncauth workflow …`: the whole update request of the service, and the reads around it.
import { syncauthCommand } from '../../profile/name.js';
import { ValidationError, fieldName, type FieldIssue } from '../../errors.js';
import {
  SCHEDULE_CRON, SCHEDULES, WorkflowNodeSchema, type WorkflowInformation, type WorkflowUpdate,
} from '../../service/models.js';
import type { CommandContext } from '../context.js';
import { checkUuid, readJsonArray, requireUuid } from '../input.js';
import { printJson, printRecord, printTable } from '../output.js';
import { withServiceClient } from '../service.js';

const CRON_NAMES = new Map<string, string>(Object.entries(SCHEDULE_CRON).map(([name, cron]) => [cron, name]));

function describeSchedule(workflow: WorkflowInformation): string {
  const entries = workflow.schedule?.crontab_entries ?? [];
  if (entries.length === 0) return 'none';
  return entries.map((e) => {
    const name = CRON_NAMES.get(e.cron_expression);
    return name ? `${name} (${e.cron_expression})` : e.cron_expression;
  }).join(', ');
}

function show(context: CommandContext, workflow: WorkflowInformation): void {
  if (context.json) {
    printJson(context.io, workflow);
    return;
  }
  printRecord(context.io, {
    id: workflow.id,
    name: workflow.name,
    status: workflow.status,
    workflow_type: workflow.workflow_type ?? null,
    sources: workflow.sources,
    destinations: workflow.destinations,
    schedule: describeSchedule(workflow),
    reprocess_all: workflow.reprocess_all ?? null,
    workflow_nodes: workflow.workflow_nodes.map((n) => `${n.name} (${n.type}/${n.subtype})`),
    created_at: workflow.created_at,
    updated_at: workflow.updated_at ?? null,
  });
}

export async function getWorkflow(context: CommandContext, id: string): Promise<void> {
  requireUuid(id);
  show(context, await withServiceClient(context, (client) => client.getWorkflow(id)));
}

export async function listWorkflows(context: CommandContext): Promise<void> {
  const workflows = await withServiceClient(context, (client) => client.listWorkflows());
  if (context.json) {
    printJson(context.io, workflows);
    return;
  }
  if (workflows.length === 0) {
    context.io.stderr.write('no workflows\n');
    return;
  }
  printTable(context.io, ['ID', 'NAME', 'STATUS', 'SCHEDULE'], workflows.map((w) => [w.id, w.name, w.status, describeSchedule(w)]));
}

interface UpdateOptions {
  name?: string;
  sourceId?: string;
  destinationId?: string;
  workflowType?: string;
  nodes?: string;
  schedule?: string;
  clearSchedule?: boolean;
  reprocessAll?: boolean;
}

/** Builds the request body from exactly the flags given; an absent flag is absent from the body. */
export async function buildWorkflowUpdate(options: UpdateOptions, stdin?: NodeJS.ReadableStream): Promise<WorkflowUpdate> {
  const issues: FieldIssue[] = [];
  const body: WorkflowUpdate = {};
  if (options.name !== undefined) {
    if (!options.name.trim()) issues.push({ field: '--name', message: 'must not be empty' });
    body.name = options.name;
  }
  if (options.sourceId !== undefined) {
    checkUuid(options.sourceId, '--source-id', issues);
    body.source_id = options.sourceId;
  }
  if (options.destinationId !== undefined) {
    checkUuid(options.destinationId, '--destination-id', issues);
    body.destination_id = options.destinationId;
  }
  if (options.workflowType !== undefined) body.workflow_type = options.workflowType as WorkflowUpdate['workflow_type'];
  if (options.schedule !== undefined) {
    if (!(SCHEDULES as string[]).includes(options.schedule)) {
      issues.push({ field: '--schedule', message: `unknown schedule "${options.schedule}"; it must be one of: ${SCHEDULES.join(', ')}` });
    }
    body.schedule = options.schedule as WorkflowUpdate['schedule'];
  }
  if (options.clearSchedule) body.schedule = null;
  if (options.reprocessAll !== undefined) body.reprocess_all = options.reprocessAll;
  if (options.nodes !== undefined) {
    const nodes = await readJsonArray(options.nodes, '--nodes', stdin);
    nodes.forEach((node, index) => {
      const result = WorkflowNodeSchema.safeParse(node);
      if (!result.success) {
        for (const issue of result.error.issues) {
          issues.push({ field: fieldName(issue.path, `--nodes[${index}]`), message: issue.code === 'unrecognized_keys' ? `unknown field(s) ${issue.keys.join(', ')}; a node has id, name, type, subtype, settings` : issue.message });
        }
      }
    });
    body.workflow_nodes = nodes as WorkflowUpdate['workflow_nodes'];
  }
  if (issues.length) throw new ValidationError(issues);
  if (Object.keys(body).length === 0) {
    throw new ValidationError([{ field: '', message: 'nothing to update: give at least one of --name, --source-id, --destination-id, --workflow-type, --nodes, --schedule, --clear-schedule, --reprocess-all, --no-reprocess-all' }]);
  }
  return body;
}

export async function updateWorkflow(context: CommandContext, id: string, options: UpdateOptions): Promise<void> {
  requireUuid(id);
  const body = await buildWorkflowUpdate(options, context.stdin);
  const updated = await withServiceClient(context, (client) => client.updateWorkflow(id, body));
  if (!context.json) context.io.stderr.write(`updated workflow ${updated.name} (${updated.id}): ${Object.keys(body).join(', ')}\n`);
  show(context, updated);
}

export async function runWorkflow(context: CommandContext, id: string): Promise<void> {
  requireUuid(id);
  const job = await withServiceClient(context, (client) => client.runWorkflow(id));
  if (context.json) {
    printJson(context.io, job);
    return;
  }
  context.io.stderr.write(`started job ${job.id} of workflow ${job.workflow_name} (${job.workflow_id})\n`);
  printRecord(context.io, { id: job.id, workflow_id: job.workflow_id, workflow_name: job.workflow_name, status: job.status, created_at: job.created_at });
  context.io.stderr.write(`follow it with \`${syncauthCommand(`jobs show ${job.id}`)}\`\n`);
}
