// Every recipe in deploy/ beside a profile made the usual way: `syncauth setup --yes` with its defaults (connector
// dropbox-data for dropbox://data, wired into an existing workflow), then the recipe's own command line and
// environment as it ships them (parsed from the YAML or the unit file), only the values its instructions say to
// replace filled in (service URL, secrets, workflow id, paths). Each must leave the workspace with exactly one
// dropbox connector, setup's, holding a live token, and the workflow still reading it: a recipe that named its
// connector differently would make a second one no workflow reads.
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { ServiceClient } from '../../src/service/index.js';
import { CLI, ROOT, tempDir } from '../helpers/cli.js';
import { grantRefreshToken, onboardingEnv, runCli, startOnboarding, type Onboarding } from '../helpers/onboarding.js';
import { waitFor } from '../helpers/wait.js';
import { environmentOf, expandSpecifiers, readUnit, splitCommand, valueOf } from './unit-file.js';

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string } };
}
interface Container {
  name: string;
  args?: string[];
  command?: string[];
  env?: EnvVar[];
  volumeMounts?: { name: string; mountPath: string }[];
}
interface Manifest {
  kind: string;
  spec: Record<string, unknown>;
}

/** The syncauth container of a manifest's pod template (Deployment, Job or CronJob). */
function syncauthContainer(file: string): Container {
  const docs = parseAllDocuments(readFileSync(path.join(ROOT, 'deploy/kubernetes', file), 'utf8')).map((d) => d.toJS() as Manifest);
  for (const doc of docs) {
    const spec = doc.spec as { template?: { spec: PodSpec }; jobTemplate?: { spec: { template: { spec: PodSpec } } } };
    const pod = spec.template?.spec ?? spec.jobTemplate?.spec.template.spec;
    const found = [...(pod?.initContainers ?? []), ...(pod?.containers ?? [])].find((c) => c.name === 'syncauth');
    if (found) return found;
  }
  throw new Error(`${file} has no syncauth container`);
}
interface PodSpec {
  initContainers?: Container[];
  containers: Container[];
}

const onboardings: Onboarding[] = [];
const children: ReturnType<typeof spawn>[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const ob of onboardings.splice(0)) await ob.emulator.close();
});

interface SetUp {
  ob: Onboarding;
  refreshToken: string;
  connectorId: string;
  workflowId: string;
  /** The setup's config dir and store key, for recipes that read the stored profile (systemd). */
  configDir: string;
  storeKey: string;
}

/**
 * A workspace with a workflow (made in the service, as its users do), and `syncauth setup --yes` run with its
 * defaults but for the workflow to wire, its profile kept under `configDir`.
 */
async function profileMadeBySetup(configDir: string): Promise<SetUp> {
  const ob = await startOnboarding({ emulator: { tokenLifetimeSeconds: 3600 } });
  onboardings.push(ob);
  const client = new ServiceClient({ baseUrl: ob.emulator.url, apiKey: ob.apiKey });
  const workflow = await client.createWorkflow({ name: 'ingest', workflow_type: 'basic' }).finally(() => client.close());
  const refreshToken = await grantRefreshToken(ob);
  const dir = path.dirname(configDir);
  mkdirSync(dir, { recursive: true });
  const home = { dir, configDir, storeKey: 'a-store-key-for-the-recipes-test-0123456789' };
  const result = await runCli(['setup', '--yes', '--json'], {
    env: onboardingEnv(ob, home, { SYNCAUTH_REFRESH_TOKEN: refreshToken, SYNCAUTH_WORKFLOW_ID: workflow.id }),
    cwd: dir,
    timeoutMs: 30_000,
  });
  expect(result.code, result.stderr).toBe(0);
  const out = JSON.parse(result.stdout) as { connector: { id: string; name: string }; workflow: { id: string } | null };
  expect(out.connector.name).toBe('dropbox-data');
  expect(out.workflow?.id).toBe(workflow.id);
  const set: SetUp = { ob, refreshToken, connectorId: out.connector.id, workflowId: workflow.id, configDir, storeKey: home.storeKey };
  expectOneConnectorReadByTheWorkflow(set);
  return set;
}

/** The workspace holds one dropbox connector, setup's, with a live token, and the workflow reads it. */
function expectOneConnectorReadByTheWorkflow(set: SetUp): void {
  const ws = set.ob.emulator.state.workspaces.get('default');
  const dropbox = [...(ws?.sources.values() ?? [])].filter((s) => s.type === 'dropbox');
  expect(dropbox.map((s) => ({ id: s.id, name: s.name }))).toEqual([{ id: set.connectorId, name: 'dropbox-data' }]);
  const token = dropbox[0]?.config.token as string;
  expect(set.ob.emulator.state.accessTokens.get(token)?.expiresAt ?? 0).toBeGreaterThan(Date.now());
  expect(ws?.workflows.get(set.workflowId)?.sources).toEqual([set.connectorId]);
}

interface Started {
  child: ReturnType<typeof spawn>;
  out: { stdout: string; stderr: string };
  exited: Promise<number | null>;
}

function startCli(args: string[], env: Record<string, string>, cwd: string): Started {
  const child = spawn(process.execPath, [CLI, ...args], { cwd, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: cwd, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  const out = { stdout: '', stderr: '' };
  child.stdout?.setEncoding('utf8').on('data', (d: string) => (out.stdout += d));
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (out.stderr += d));
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return { child, out, exited };
}

/**
 * A daemon's run to its end: a one-shot recipe exits by itself; a resident one runs until it is ready and some
 * dropbox connector holds the token it published to `tokenFile` (it has reconciled), then gets SIGTERM.
 */
async function runToTheEnd(run: Started, set: SetUp, tokenFile: string | undefined): Promise<void> {
  if (tokenFile !== undefined) {
    const start = await waitFor('the start line', () => {
      if (run.child.exitCode !== null) throw new Error(`syncauth exited (${run.child.exitCode}):\n${run.out.stdout}\n${run.out.stderr}`);
      const line = run.out.stdout.split('\n').find((l) => l.includes('daemon started'));
      return line ? (JSON.parse(line) as { listen: string }) : undefined;
    }, 20_000);
    await waitFor('readiness', async () => ((await fetch(`${start.listen}/readyz`)).status === 200 ? true : undefined), 20_000);
    await waitFor('a connector with the published token', () => {
      const token = readFileSync(tokenFile, 'utf8');
      const ws = set.ob.emulator.state.workspaces.get('default');
      return [...(ws?.sources.values() ?? [])].some((s) => s.type === 'dropbox' && s.config.token === token) ? true : undefined;
    }, 20_000);
    run.child.kill('SIGTERM');
  }
  const timer = setTimeout(() => run.child.kill('SIGKILL'), 30_000);
  const code = await run.exited;
  clearTimeout(timer);
  expect(code, `${run.out.stdout}\n${run.out.stderr}`).toBe(0);
}

describe('the Kubernetes recipes beside a profile made by setup', () => {
  it.each([
    ['sidecar.yaml', false],
    ['job.yaml', true],
    ['cronjob.yaml', true],
  ] as const)('%s updates setup\'s connector, the workflow still reading it, and makes no other', async (file, oneShot) => {
    const root = tempDir('syncauth-recipe-');
    const set = await profileMadeBySetup(path.join(root, 'setup-host', 'config'));
    const container = syncauthContainer(file);
    expect(container.command, 'the image entrypoint runs the args').toBeUndefined();
    expect(oneShot ? container.args : undefined).toEqual(oneShot ? expect.arrayContaining(['daemon', '--once']) : undefined);
    const pod = path.join(root, 'pod');
    const mounts = new Map<string, string>();
    for (const m of container.volumeMounts ?? []) {
      const dir = path.join(pod, m.name);
      mkdirSync(dir, { recursive: true });
      mounts.set(m.mountPath, dir);
    }
    const local = (value: string): string => {
      for (const [mountPath, dir] of mounts) if (value === mountPath || value.startsWith(`${mountPath}/`)) return dir + value.slice(mountPath.length);
      return value;
    };
    const app = set.ob.app;
    const secrets: Record<string, string> = {
      'app-key': app.appKey, 'app-secret': app.appSecret, 'refresh-token': set.refreshToken, 'api-key': set.ob.apiKey,
      'notify-secret': `whsec_${Buffer.alloc(32, 5).toString('base64')}`, 'grant-key': Buffer.alloc(32, 6).toString('base64'), 'redis-password': 'recipe-redis-password',
    };
    // What the recipe's instructions say to replace, and the paths of its volumes; everything else as shipped.
    const replaced: Record<string, string> = { SYNCAUTH_BASE_URL: set.ob.emulator.url, SYNCAUTH_WORKFLOW_ID: set.workflowId };
    const env: Record<string, string> = { SYNCAUTH_TOKEN_URL: set.ob.emulator.tokenUrl };
    for (const variable of container.env ?? []) {
      const ref = variable.valueFrom?.secretKeyRef;
      if (ref) {
        const value = secrets[ref.key];
        if (value === undefined) throw new Error(`the test's Secret has no key ${ref.key}`);
        env[variable.name] = value;
      } else if (variable.name === 'SYNCAUTH_REDIS_URL') continue; // one replica here: nobody to coordinate with
      // Notices go to a port nothing listens on: none is due while the grant works.
      else if (variable.name === 'SYNCAUTH_NOTIFY_URL') env[variable.name] = 'http://127.0.0.1:9/hook';
      else env[variable.name] = replaced[variable.name] ?? local(variable.value ?? '');
    }
    // One replica without Redis: the page needs no grant key then, and refuses one.
    delete env.SYNCAUTH_GRANT_KEY;
    expect(Object.values(env).filter((v) => v.startsWith('REPLACE_WITH_'))).toEqual([]);
    const args = (container.args ?? []).map((arg, i, all) => (all[i - 1] === '--listen' || all[i - 1] === '--reauth-listen' ? '127.0.0.1:0' : local(arg)));
    const tokenFile = args[args.indexOf('--token-file') + 1] as string;
    await runToTheEnd(startCli(args, env, pod), set, oneShot ? undefined : tokenFile);
    expectOneConnectorReadByTheWorkflow(set);
  }, 90_000);
});

describe('the systemd recipes beside a profile made by setup as the service user', () => {
  it.each([
    ['syncauth.service', false],
    ['syncauth-once.service', true],
  ] as const)('%s reconciles setup\'s connector, the workflow still reading it, and makes no other', async (file, oneShot) => {
    const root = tempDir('syncauth-recipe-');
    const dirs = { runtime: path.join(root, 'run'), state: path.join(root, 'state') };
    const unit = readUnit(path.join(ROOT, 'deploy/systemd', file));
    const unitEnv = Object.fromEntries(Object.entries(environmentOf(unit)).map(([k, v]) => [k, expandSpecifiers(v, dirs)]));
    // deploy/README.md: setup runs as the service user with the unit's SYNCAUTH_CONFIG_DIR and store.
    const set = await profileMadeBySetup(unitEnv.SYNCAUTH_CONFIG_DIR as string);
    mkdirSync(path.join(dirs.runtime, 'syncauth'), { recursive: true });
    const group = valueOf(unit, 'Service', 'Group');
    const args = splitCommand(valueOf(unit, 'Service', 'ExecStart') as string)
      .slice(1)
      .map((arg) => expandSpecifiers(arg, dirs))
      .map((arg) => (arg === '127.0.0.1:9464' ? '127.0.0.1:0' : arg === group ? 'nogroup' : arg));
    // EnvironmentFile= holds the store key only.
    const tokenFile = (args[args.indexOf('--token-file') + 1] as string).replace('{profile}', 'default');
    await runToTheEnd(startCli(args, { ...unitEnv, SYNCAUTH_STORE_KEY: set.storeKey }, root), set, oneShot ? undefined : tokenFile);
    expectOneConnectorReadByTheWorkflow(set);
  }, 90_000);
});
