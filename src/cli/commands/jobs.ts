// `syncauth jobs …`: the jobs a workflow's runs make, and stopping one.
import { ValidationError, type FieldIssue } from '../../errors.js';
import type { JobInformation } from '../../service/models.js';
import type { CommandContext } from '../context.js';
import { checkUuid, requireUuid } from '../input.js';
import { printJson, printRecord, printTable } from '../output.js';
import { withServiceClient } from '../service.js';

function record(job: JobInformation): Record<string, unknown> {
  return {
    id: job.id,
    workflow_id: job.workflow_id,
    workflow_name: job.workflow_name,
    status: job.status,
    job_type: job.job_type ?? null,
    created_at: job.created_at,
    runtime: job.runtime ?? null,
  };
}

export async function listJobs(context: CommandContext, options: { workflow?: string; status?: string }): Promise<void> {
  const issues: FieldIssue[] = [];
  if (options.workflow !== undefined) checkUuid(options.workflow, '--workflow', issues);
  if (options.status !== undefined && options.status.trim() === '') issues.push({ field: '--status', message: 'must not be empty' });
  if (issues.length) throw new ValidationError(issues);
  const jobs = await withServiceClient(context, (client) => client.listJobs({
    ...(options.workflow === undefined ? {} : { workflowId: options.workflow }),
    ...(options.status === undefined ? {} : { status: options.status.toUpperCase() }),
  }));
  // Newest first: the job just started is the one people look for.
  jobs.sort((a, b) => Date.parse(b.created_at) - Date.parse(a.created_at));
  if (context.json) {
    printJson(context.io, jobs);
    return;
  }
  if (jobs.length === 0) {
    context.io.stderr.write('no jobs\n');
    return;
  }
  printTable(context.io, ['ID', 'WORKFLOW', 'STATUS', 'CREATED', 'RUNTIME'],
    jobs.map((j) => [j.id, j.workflow_name, j.status, j.created_at, j.runtime ?? '']));
}

export async function showJob(context: CommandContext, id: string): Promise<void> {
  requireUuid(id);
  const job = await withServiceClient(context, (client) => client.getJob(id));
  if (context.json) printJson(context.io, job);
  else printRecord(context.io, record(job));
}

export async function cancelJob(context: CommandContext, id: string): Promise<void> {
  requireUuid(id);
  const job = await withServiceClient(context, async (client) => {
    await client.cancelJob(id);
    return client.getJob(id);
  });
  if (context.json) {
    printJson(context.io, job);
    return;
  }
  context.io.stderr.write(job.status === 'STOPPED'
    ? `cancelled job ${id}\n`
    : `asked the service to cancel job ${id}; it is ${job.status} now\n`);
}
