// Setup's question about the workflow, at a terminal when none was named: one of the workspace's workflows, a
// new one made for the connector, or none; then the schedule. Asked before the browser step, so the answer can
// be shown among the changes; a new workflow is made only once the connector exists (nothing is written before
// the grant).
import { syncauthCommand } from '../../profile/name.js';
import { SCHEDULE_CRON, SCHEDULES, type Schedule } from '../../service/constants.js';
import type { ServiceClient } from '../../service/client.js';
import type { WorkflowInformation } from '../../service/models.js';
import type { Prompter } from '../factory.js';

export type WorkflowChoice =
  | { kind: 'none' }
  | { kind: 'existing'; id: string; name: string; schedule?: Schedule }
  | { kind: 'create'; name: string; schedule?: Schedule };

const NEW = '__new__';
const NONE = '__none__';
const KEEP = '__keep__';
const MANUAL = '__manual__';

/** What a workflow reads from now, for its line in the list: wiring it to the new connector replaces that. */
function readsFrom(workflow: WorkflowInformation, names: Map<string, string>): string {
  if (workflow.sources.length === 0) return 'reads from no source yet';
  const sources = workflow.sources.map((id) => names.get(id) ?? id).join(', ');
  return `reads from ${sources} (replaced by the new connector)`;
}

function cronOf(workflow: WorkflowInformation): string | undefined {
  const entries = workflow.schedule?.crontab_entries.map((e) => e.cron_expression) ?? [];
  return entries.length > 0 ? entries.join(', ') : undefined;
}

/** Asks at the terminal (only called when interactive and neither --workflow-id nor --no-workflow was given). */
export async function chooseWorkflow(client: ServiceClient, options: { connectorName: string; prompter: Prompter }): Promise<WorkflowChoice> {
  const { prompter } = options;
  const [workflows, sources] = await Promise.all([client.listWorkflows(), client.listSources()]);
  const names = new Map(sources.map((s) => [s.id, s.name]));
  const sorted = [...workflows].sort((a, b) => a.name.localeCompare(b.name));
  const picked = await prompter.select<string>('Which workflow should read from the connector?', [
    ...sorted.map((w) => ({ value: w.id, label: `${w.name} (${w.id})`, hint: readsFrom(w, names) })),
    { value: NEW, label: 'A new workflow', hint: 'made once the connector exists' },
    { value: NONE, label: 'None: the connector alone', hint: `wire one later with \`${syncauthCommand('profile set --workflow-id')}\`` },
  ], { initial: sorted.length > 0 ? (sorted[0] as WorkflowInformation).id : NEW });
  if (picked === NONE) return { kind: 'none' };
  if (picked === NEW) {
    const name = await prompter.text('Name of the new workflow', {
      initial: options.connectorName,
      validate: (value) => (value.trim() ? undefined : 'required'),
    });
    const schedule = await askSchedule(undefined, prompter);
    return { kind: 'create', name, ...(schedule ? { schedule } : {}) };
  }
  const workflow = sorted.find((w) => w.id === picked) as WorkflowInformation;
  const schedule = await askSchedule(workflow, prompter);
  return { kind: 'existing', id: workflow.id, name: workflow.name, ...(schedule ? { schedule } : {}) };
}

/** A named schedule, or undefined: keep the workflow's own (an existing one) or run it by hand (a new one). */
async function askSchedule(workflow: WorkflowInformation | undefined, prompter: Prompter): Promise<Schedule | undefined> {
  const current = workflow ? cronOf(workflow) : undefined;
  const stay = workflow
    ? { value: KEEP, label: 'Keep its schedule', hint: current ? `cron ${current}` : 'it has none: runs by hand' }
    : { value: MANUAL, label: 'No schedule', hint: `run it with \`${syncauthCommand('workflow run ID')}\`` };
  const picked = await prompter.select<string>('How often should it run?', [
    stay,
    ...SCHEDULES.map((s) => ({ value: s, label: s, hint: `cron ${SCHEDULE_CRON[s]}` })),
  ], { initial: stay.value });
  return picked === KEEP || picked === MANUAL ? undefined : (picked as Schedule);
}

/** After the connector exists: creates the chosen new workflow reading from it. */
export async function createChosenWorkflow(
  client: ServiceClient,
  choice: Extract<WorkflowChoice, { kind: 'create' }>,
  connectorId: string,
): Promise<WorkflowInformation> {
  return client.createWorkflow({
    name: choice.name,
    workflow_type: 'basic',
    source_id: connectorId,
    ...(choice.schedule ? { schedule: choice.schedule } : {}),
  });
}
