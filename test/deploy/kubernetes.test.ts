// deploy/kubernetes: every manifest is valid against the Kubernetes schemas (kubernetes-models, generated from
// the API's OpenAPI definitions: types, enums and required fields at run time; unknown fields through the
// TypeScript types, as `kubectl apply`'s strict field validation would refuse them), holds the fields the
// guide (docs/production.md) relies on, and its syncauth containers' arguments and environment run the real CLI: the sidecar's
// replicas become ready on the paths their probes name and publish the token as the pod's group can read it,
// and the Job's one-shot run exits 0 with the connector reconciled.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createServer as createHttpsServer } from 'node:https';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { CronJob } from 'kubernetes-models/batch/v1/CronJob';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { Redis as RedisClient } from 'ioredis';
import { runGrantHook } from '../../src/exec/grant-hook.js';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { DEFAULT_EMULATOR_API_KEY } from '../../src/emulator/index.js';
import { ServiceClient } from '../../src/service/index.js';
import { defaultConnectorName } from '../../src/sync/reconcile.js';
import { CLI, ROOT, tempDir } from '../helpers/cli.js';
import { redisAvailability, startRedisServer, type RedisServer } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { freePort } from '../helpers/ports.mjs';
import { grantRefreshToken, onboardingEnv, runCli, startOnboarding } from '../helpers/onboarding.js';
import { connectorsNamed, emulator, latestTokenOf, obtainGrant } from '../daemon/helpers.js';

const DIR = path.join(ROOT, 'deploy/kubernetes');
const FILES = readdirSync(DIR).filter((f) => f.endsWith('.yaml')).sort();
const SECRET_VARIABLES = ['SYNCAUTH_APP_KEY', 'SYNCAUTH_APP_SECRET', 'SYNCAUTH_REFRESH_TOKEN', 'SYNCAUTH_API_KEY', 'SYNCAUTH_STORE_KEY', 'SYNCAUTH_NOTIFY_SECRET', 'SYNCAUTH_GRANT_KEY', 'REDIS_PASSWORD'];
/** The image's entrypoint (Dockerfile): the container's args follow it. */
const ENTRYPOINT = ['node', '/app/dist/cli/main.js'];
/** The `node` user of the official Node images, which the Dockerfile runs as. */
const NODE_UID = 1000;

// ---- the manifests, loosely typed for reading ----

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string } };
}
interface Probe {
  httpGet?: { path: string; port: string | number };
}
interface Container {
  name: string;
  image?: string;
  args?: string[];
  command?: string[];
  env?: EnvVar[];
  ports?: { name?: string; containerPort: number }[];
  restartPolicy?: string;
  startupProbe?: Probe;
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: Record<string, unknown> & { capabilities?: { drop?: string[] } };
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
}
interface PodSpec {
  initContainers?: Container[];
  containers: Container[];
  volumes?: { name: string; emptyDir?: { medium?: string } }[];
  securityContext?: { fsGroup?: number; runAsNonRoot?: boolean };
  restartPolicy?: string;
}
interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  spec?: Record<string, unknown>;
  stringData?: Record<string, string>;
  data?: Record<string, string>;
}

const documents: { file: string; doc: Manifest }[] = FILES.flatMap((file) =>
  parseAllDocuments(readFileSync(path.join(DIR, file), 'utf8')).map((d) => {
    if (d.errors.length > 0 || d.warnings.length > 0) throw new Error(`${file}: ${[...d.errors, ...d.warnings].map((e) => e.message).join('; ')}`);
    return { file, doc: d.toJS() as Manifest };
  }),
);

function find(kind: string, name: string): Manifest {
  const found = documents.find(({ doc }) => doc.kind === kind && doc.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} in deploy/kubernetes`);
  return found.doc;
}

function podOf(doc: Manifest): PodSpec {
  const spec = doc.spec as { template?: { spec: PodSpec }; jobTemplate?: { spec: { template: { spec: PodSpec } } } };
  const pod = spec.template?.spec ?? spec.jobTemplate?.spec.template.spec;
  if (!pod) throw new Error(`${doc.kind} ${doc.metadata.name} has no pod template`);
  return pod;
}

function containersOf(doc: Manifest): Container[] {
  if (!['Deployment', 'Job', 'CronJob'].includes(doc.kind)) return [];
  const pod = podOf(doc);
  return [...(pod.initContainers ?? []), ...pod.containers];
}

function syncauthOf(doc: Manifest): Container {
  const container = containersOf(doc).find((c) => c.name === 'syncauth');
  if (!container) throw new Error(`${doc.kind} ${doc.metadata.name} has no syncauth container`);
  return container;
}

function envOf(container: Container, name: string): EnvVar | undefined {
  return container.env?.find((e) => e.name === name);
}

/** The value after `flag` in `args`. */
function flagValue(args: readonly string[], flag: string): string | undefined {
  const i = args.indexOf(flag);
  return i >= 0 ? args[i + 1] : undefined;
}

/** The daemon's paths that answer 503 for as long as a profile needs a person (docs/daemon.md). */
const NEEDS_A_PERSON_503 = ['/readyz'];

/**
 * When `service` routes to the re-authorization page of `deployment`'s syncauth (its --reauth-listen port), what
 * would keep a person from it: a pod NotReady while a re-authorization is needed (a readiness probe on a path
 * that is then 503) drops out of the Service's endpoints unless it publishes NotReady addresses, and a named
 * target port that only a native sidecar declares is left out of the endpoints by some Kubernetes releases
 * (kubernetes/kubernetes#127958). null when the Service does not route to the page.
 */
function pageProblems(service: Manifest, deployment: Manifest): string[] | null {
  const spec = service.spec as { selector?: Record<string, string>; publishNotReadyAddresses?: boolean; ports: { targetPort?: string | number; port: number }[] };
  const labels = (deployment.spec as { template: { metadata: { labels: Record<string, string> } } }).template.metadata.labels;
  if (!spec.selector || !Object.entries(spec.selector).every(([k, v]) => labels[k] === v)) return null;
  const pod = podOf(deployment);
  const container = syncauthOf(deployment);
  const listen = flagValue(container.args ?? [], '--reauth-listen');
  if (listen === undefined) return null;
  const pagePort = Number(listen.split(':').pop());
  const pageName = container.ports?.find((p) => p.containerPort === pagePort)?.name;
  const toPage = spec.ports.filter((p) => (p.targetPort ?? p.port) === pagePort || (p.targetPort !== undefined && p.targetPort === pageName));
  if (toPage.length === 0) return null;
  const problems: string[] = [];
  const gated = [...(pod.initContainers ?? []), ...pod.containers].filter((c) => NEEDS_A_PERSON_503.includes(c.readinessProbe?.httpGet?.path ?? ''));
  if (gated.length > 0 && spec.publishNotReadyAddresses !== true) {
    problems.push(`Service ${service.metadata.name} loses its endpoints while a re-authorization is needed (${gated.map((c) => c.name).join(', ')} NotReady on ${NEEDS_A_PERSON_503.join(', ')}): set publishNotReadyAddresses: true`);
  }
  const onSidecar = (pod.initContainers ?? []).includes(container);
  for (const port of toPage) {
    if (onSidecar && typeof port.targetPort === 'string') problems.push(`Service ${service.metadata.name} names the port ${port.targetPort} of a native sidecar: give its number (${pagePort})`);
  }
  return problems;
}

const sidecar = find('Deployment', 'app');
const sidecarPod = podOf(sidecar);
const syncauth = syncauthOf(sidecar);
const job = find('Job', 'syncauth-once');
const secret = find('Secret', 'syncauth');
const fleet = find('Deployment', 'syncauth-fleet');
const fleetPod = podOf(fleet);
const fleetSyncauth = syncauthOf(fleet);
/** The fleet's init container, which copies the profiles' Secret into the replica's config dir. */
const fleetSeed = (fleetPod.initContainers ?? []).find((c) => c.name === 'profiles') as Container;

// ---- the schemas ----

const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'apps/v1/Deployment': Deployment,
  'batch/v1/Job': Job,
  'batch/v1/CronJob': CronJob,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'networking.k8s.io/v1/Ingress': Ingress,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
};
const TYPES: Record<string, { module: string; type: string }> = {
  'apps/v1/Deployment': { module: 'kubernetes-models/apps/v1/Deployment', type: 'IDeployment' },
  'batch/v1/Job': { module: 'kubernetes-models/batch/v1/Job', type: 'IJob' },
  'batch/v1/CronJob': { module: 'kubernetes-models/batch/v1/CronJob', type: 'ICronJob' },
  'policy/v1/PodDisruptionBudget': { module: 'kubernetes-models/policy/v1/PodDisruptionBudget', type: 'IPodDisruptionBudget' },
  'v1/Secret': { module: 'kubernetes-models/v1/Secret', type: 'ISecret' },
  'v1/Service': { module: 'kubernetes-models/v1/Service', type: 'IService' },
  'v1/ServiceAccount': { module: 'kubernetes-models/v1/ServiceAccount', type: 'IServiceAccount' },
  'networking.k8s.io/v1/Ingress': { module: 'kubernetes-models/networking.k8s.io/v1/Ingress', type: 'IIngress' },
  'rbac.authorization.k8s.io/v1/Role': { module: 'kubernetes-models/rbac.authorization.k8s.io/v1/Role', type: 'IRole' },
  'rbac.authorization.k8s.io/v1/RoleBinding': { module: 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding', type: 'IRoleBinding' },
};

/**
 * Type-checks `docs` as object literals of the API types, in memory: TypeScript refuses a property the type
 * does not have, at any depth, which is the unknown field `kubectl apply` refuses. Returns the messages.
 */
function typeCheck(docs: Manifest[]): string[] {
  const file = path.join(ROOT, 'test/deploy/__manifests__.ts');
  const lines: string[] = [];
  docs.forEach((doc, i) => {
    const t = TYPES[`${doc.apiVersion}/${doc.kind}`];
    if (!t) throw new Error(`no type for ${doc.apiVersion} ${doc.kind}`);
    lines.push(`import type { ${t.type} as T${i} } from '${t.module}';`);
    lines.push(`export const doc${i}: T${i} = ${JSON.stringify(doc, null, 1)};`);
  });
  const source = lines.join('\n');
  const options: ts.CompilerOptions = {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  host.getSourceFile = (name, language, ...rest) => (name === file ? ts.createSourceFile(name, source, language) : getSourceFile(name, language, ...rest));
  host.fileExists = (name) => name === file || fileExists(name);
  const program = ts.createProgram([file], options, host);
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const where = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
    const line = where ? source.split('\n')[where.line]?.trim() : '';
    return `${ts.flattenDiagnosticMessageText(d.messageText, ' ')} (at ${line})`;
  });
}

describe('the Kubernetes manifests', () => {
  it('are valid against the Kubernetes schemas', () => {
    expect(FILES).toEqual(expect.arrayContaining(['sidecar.yaml', 'redis.yaml', 'job.yaml', 'secret.example.yaml', 'reauth.yaml', 'rbac.yaml', 'fleet.yaml']));
    for (const { file, doc } of documents) {
      const Model = MODELS[`${doc.apiVersion}/${doc.kind}`];
      expect([file, doc.kind, Model !== undefined]).toEqual([file, doc.kind, true]);
      expect(() => new (Model as new (data: Manifest) => { validate(): void })(doc).validate(), `${file}: ${doc.kind} ${doc.metadata.name}`).not.toThrow();
    }
  });

  it('hold no field the API does not know, at any depth', () => {
    const messages = typeCheck(documents.map((d) => d.doc));
    expect(messages).toEqual([]);
  }, 60_000);

  it('would be refused with a misplaced or misspelled field, or a wrong type (the checks above can fail)', () => {
    const broken = structuredClone(sidecar) as Manifest;
    const pod = podOf(broken);
    (pod.initContainers?.[0] as unknown as Record<string, unknown>).restartPolicyy = 'Always';
    (pod.containers[0] as unknown as Record<string, unknown>).securityContext = { runAsNonRoot: true, readOnlyRootFileSystem: true };
    expect(typeCheck([broken]).join('\n')).toMatch(/restartPolicyy"?' does not exist in type 'IContainer'[\s\S]*readOnlyRootFileSystem"?' does not exist in type 'ISecurityContext'/);
    const wrongType = structuredClone(sidecar) as Manifest;
    (podOf(wrongType).initContainers?.[0]?.ports?.[0] as { containerPort: unknown }).containerPort = '9464';
    expect(() => new Deployment(wrongType as never).validate()).toThrow(/containerPort/);
  }, 60_000);

  it('run syncauth as a native sidecar of two replicas, the token on an in-memory volume the app reads through its group', () => {
    expect((sidecar.spec as { replicas: number }).replicas).toBe(2);
    expect(sidecarPod.containers.map((c) => c.name)).not.toContain('syncauth');
    expect(syncauth.restartPolicy).toBe('Always');
    const tokenFile = flagValue(syncauth.args ?? [], '--token-file') as string;
    const mount = syncauth.volumeMounts?.find((m) => tokenFile.startsWith(`${m.mountPath}/`));
    expect(mount).toBeDefined();
    const volume = sidecarPod.volumes?.find((v) => v.name === mount?.name);
    expect(volume?.emptyDir?.medium).toBe('Memory');
    const app = sidecarPod.containers.find((c) => c.name === 'app') as Container;
    expect(app.volumeMounts).toContainEqual({ name: mount?.name, mountPath: mount?.mountPath, readOnly: true });
    // An emptyDir is world-writable, so the token is in syncauth's own subdirectory of it, and the app reads it there.
    expect(envOf(app, 'DROPBOX_TOKEN_FILE')?.value).toBe(path.join(path.dirname(tokenFile), `syncauth-${NODE_UID}`, path.basename(tokenFile)));
    // 0640 to the pod's fsGroup, which every container of the pod holds; the app runs as another user.
    expect(flagValue(syncauth.args ?? [], '--token-file-mode')).toBe('0640');
    expect(flagValue(syncauth.args ?? [], '--token-file-group')).toBe(String(sidecarPod.securityContext?.fsGroup));
    expect(app.securityContext?.runAsUser).not.toBe(syncauth.securityContext?.runAsUser);
    expect(syncauth.securityContext?.runAsUser).toBe(NODE_UID);
  });

  it('probe /readyz and /healthz on the named port the daemon listens on, beyond loopback', () => {
    const listen = flagValue(syncauth.args ?? [], '--listen') as string;
    expect(listen).toBe('0.0.0.0:9464');
    const port = syncauth.ports?.find((p) => p.name === 'health');
    expect(port?.containerPort).toBe(Number(listen.split(':')[1]));
    expect(syncauth.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'health' });
    expect(syncauth.startupProbe?.httpGet).toEqual({ path: '/startupz', port: 'health' });
    expect(syncauth.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'health' });
  });

  it('take every secret from the Secret, which holds placeholders only', () => {
    const stringData = secret.stringData ?? {};
    expect(secret.data).toBeUndefined();
    for (const value of Object.values(stringData)) expect(value).toMatch(/^REPLACE_WITH_[A-Z_]+$/);
    for (const { file, doc } of documents) {
      for (const container of containersOf(doc)) {
        for (const variable of container.env ?? []) {
          if (!SECRET_VARIABLES.includes(variable.name)) continue;
          expect([file, variable.name, variable.value]).toEqual([file, variable.name, undefined]);
          const ref = variable.valueFrom?.secretKeyRef;
          expect([file, variable.name, ref?.name, ref && ref.key in stringData]).toEqual([file, variable.name, secret.metadata.name, true]);
        }
      }
    }
    for (const name of ['SYNCAUTH_APP_KEY', 'SYNCAUTH_APP_SECRET', 'SYNCAUTH_REFRESH_TOKEN', 'SYNCAUTH_API_KEY']) {
      expect(envOf(syncauth, name)?.valueFrom?.secretKeyRef).toBeDefined();
      expect(envOf(syncauthOf(job), name)?.valueFrom?.secretKeyRef).toBeDefined();
    }
    expect(envOf(syncauth, 'SYNCAUTH_STORE')?.value).toBe('env');
    // Nothing that looks like a Dropbox token or a key anywhere in the files.
    for (const file of FILES) expect(readFileSync(path.join(DIR, file), 'utf8')).not.toMatch(/\bsl\.[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{40,}/);
  });

  it('run every container unprivileged, read-only, with resources', () => {
    for (const { file, doc } of documents) {
      const containers = containersOf(doc);
      if (containers.length === 0) continue;
      expect([file, podOf(doc).securityContext?.runAsNonRoot]).toEqual([file, true]);
      for (const c of containers) {
        const where = `${file}: ${c.name}`;
        expect([where, c.securityContext?.readOnlyRootFilesystem, c.securityContext?.allowPrivilegeEscalation, c.securityContext?.capabilities?.drop]).toEqual([where, true, false, ['ALL']]);
        expect([where, c.resources?.requests?.memory !== undefined, c.resources?.limits?.memory !== undefined]).toEqual([where, true, true]);
      }
    }
  });

  it('point the replicas at the Redis Service, with the password Redis requires, from the Secret', () => {
    const service = find('Service', 'syncauth-redis') as Manifest & { spec: { ports: { port: number }[] } };
    const redisContainer = podOf(find('Deployment', 'syncauth-redis')).containers[0] as Container;
    const url = new URL(envOf(syncauth, 'SYNCAUTH_REDIS_URL')?.value ?? '');
    expect(url.protocol).toBe('redis:');
    expect(url.hostname).toBe(service.metadata.name);
    expect(Number(url.port)).toBe(service.spec.ports[0]?.port);
    // Kubernetes expands $(REDIS_PASSWORD) only from a variable defined before it.
    expect(decodeURIComponent(url.password)).toBe('$(REDIS_PASSWORD)');
    const names = (syncauth.env ?? []).map((e) => e.name);
    expect(names.indexOf('REDIS_PASSWORD')).toBeGreaterThanOrEqual(0);
    expect(names.indexOf('REDIS_PASSWORD')).toBeLessThan(names.indexOf('SYNCAUTH_REDIS_URL'));
    expect(envOf(syncauth, 'REDIS_PASSWORD')?.valueFrom?.secretKeyRef).toEqual(envOf(redisContainer, 'REDIS_PASSWORD')?.valueFrom?.secretKeyRef);
    // The password is not in redis-server's arguments.
    expect(redisContainer.args).toBeUndefined();
    expect((redisContainer.command ?? []).join(' ')).toContain('requirepass');
    expect((redisContainer.command ?? []).join(' ')).not.toMatch(/--requirepass/);
  });

  it('serve the re-authorization page through a Service and an Ingress at the public URL, and send signed notices', () => {
    const reauthListen = flagValue(syncauth.args ?? [], '--reauth-listen') as string;
    const port = syncauth.ports?.find((p) => p.name === 'reauth');
    expect(port?.containerPort).toBe(Number(reauthListen.split(':')[1]));
    expect(reauthListen.startsWith('0.0.0.0:')).toBe(true);
    const service = find('Service', 'syncauth-reauth') as Manifest & { spec: { selector: Record<string, string>; ports: { name: string; targetPort: string | number }[] } };
    const labels = (sidecar.spec as { template: { metadata: { labels: Record<string, string> } } }).template.metadata.labels;
    for (const [key, value] of Object.entries(service.spec.selector)) expect(labels[key]).toBe(value);
    expect(service.spec.ports.map((p) => p.targetPort)).toEqual([port?.containerPort]);
    // The health port (metrics) is not behind it.
    expect(JSON.stringify(service.spec)).not.toContain('9464');
    const ingress = find('Ingress', 'syncauth-reauth') as Manifest & {
      spec: { tls: { hosts: string[] }[]; rules: { host: string; http: { paths: { path: string; backend: { service: { name: string; port: { name: string } } } }[] } }[] };
    };
    const publicUrl = new URL(envOf(syncauth, 'SYNCAUTH_PUBLIC_URL')?.value ?? '');
    expect(publicUrl.protocol).toBe('https:');
    expect(ingress.spec.rules[0]?.host).toBe(publicUrl.hostname);
    expect(ingress.spec.tls[0]?.hosts).toContain(publicUrl.hostname);
    expect(ingress.spec.rules[0]?.http.paths[0]).toMatchObject({ path: '/reauthorize', backend: { service: { name: service.metadata.name, port: { name: service.spec.ports[0]?.name } } } });
    expect(new URL(envOf(syncauth, 'SYNCAUTH_NOTIFY_URL')?.value ?? '').protocol).toBe('https:');
    for (const name of ['SYNCAUTH_NOTIFY_SECRET', 'SYNCAUTH_GRANT_KEY']) expect(envOf(syncauth, name)?.valueFrom?.secretKeyRef?.name).toBe(secret.metadata.name);
  });

  it('keep the page reachable while a re-authorization is needed: its Service does not drop the NotReady pods, and reaches the sidecar by port number', () => {
    const pageServices = documents.filter(({ doc }) => doc.kind === 'Service' && pageProblems(doc, sidecar) !== null);
    expect(pageServices.map(({ doc }) => doc.metadata.name)).toEqual(['syncauth-reauth']);
    for (const { doc } of pageServices) expect(pageProblems(doc, sidecar)).toEqual([]);
    // The check can fail: the Service as first shipped, without publishNotReadyAddresses and by the port's name.
    const shipped = structuredClone(find('Service', 'syncauth-reauth')) as Manifest & { spec: { publishNotReadyAddresses?: boolean; ports: { targetPort: string | number }[] } };
    delete shipped.spec.publishNotReadyAddresses;
    for (const port of shipped.spec.ports) port.targetPort = 'reauth';
    expect(pageProblems(shipped, sidecar)?.join('\n')).toMatch(/loses its endpoints[\s\S]*names the port reauth/);
    // A pod started meanwhile must start (and so serve the page): its start-up probe is not 503 while a person is needed.
    expect(NEEDS_A_PERSON_503).toContain(syncauth.readinessProbe?.httpGet?.path);
    expect(NEEDS_A_PERSON_503).not.toContain(syncauth.startupProbe?.httpGet?.path);
  });

  it('let only the syncauth container patch the one Secret, through a ServiceAccount of its own', () => {
    const account = find('ServiceAccount', 'syncauth');
    const pod = sidecarPod as unknown as Omit<PodSpec, 'volumes'> & { serviceAccountName?: string; automountServiceAccountToken?: boolean; volumes: { name: string; projected?: { sources: { serviceAccountToken?: { path: string } }[] } }[] };
    expect(pod.serviceAccountName).toBe(account.metadata.name);
    const role = find('Role', 'syncauth-secret-update') as Manifest & { rules: { apiGroups: string[]; resources: string[]; resourceNames?: string[]; verbs: string[] }[] };
    expect(role.rules).toEqual([{ apiGroups: [''], resources: ['secrets'], resourceNames: [secret.metadata.name], verbs: ['patch'] }]);
    const binding = find('RoleBinding', 'syncauth-secret-update') as Manifest & { roleRef: { kind: string; name: string }; subjects: { kind: string; name: string }[] };
    expect(binding.roleRef).toMatchObject({ kind: 'Role', name: role.metadata.name });
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: account.metadata.name }]);
    // The token is mounted into syncauth alone, not into the app.
    expect(pod.automountServiceAccountToken).toBe(false);
    const tokenVolume = pod.volumes.find((v) => v.projected?.sources.some((source) => source.serviceAccountToken?.path === 'token'));
    expect(syncauth.volumeMounts).toContainEqual({ name: tokenVolume?.name, mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true });
    for (const c of pod.containers) expect((c.volumeMounts ?? []).map((m) => m.name)).not.toContain(tokenVolume?.name);
  });

  it('run a fleet of three replicas sharing every profile: --fleet, nothing published, Redis and the grant key from the Secret, the file store named, a budget for disruptions', () => {
    expect((fleet.spec as { replicas: number }).replicas).toBe(3);
    const args = fleetSyncauth.args ?? [];
    expect(args.slice(0, 2)).toEqual(['daemon', '--fleet']);
    // Nothing published here: every profile is shared, and served by one replica.
    for (const flag of ['--token-file', '--template', '--socket', '--config', '--once']) expect(args).not.toContain(flag);
    for (const variable of ['SYNCAUTH_TOKEN_FILE', 'SYNCAUTH_SOCKET', 'SYNCAUTH_DAEMON_CONFIG', 'SYNCAUTH_PROFILE']) expect(envOf(fleetSyncauth, variable)).toBeUndefined();
    expect(fleetPod.containers.map((c) => c.name)).toEqual(['syncauth']);
    // Redis: the Service of redis.yaml, the password expanded from a variable defined before the URL.
    const service = find('Service', 'syncauth-redis') as Manifest & { spec: { ports: { port: number }[] } };
    const url = new URL(envOf(fleetSyncauth, 'SYNCAUTH_REDIS_URL')?.value ?? '');
    expect([url.protocol, url.hostname, Number(url.port), decodeURIComponent(url.password)]).toEqual(['redis:', service.metadata.name, service.spec.ports[0]?.port, '$(REDIS_PASSWORD)']);
    const names = (fleetSyncauth.env ?? []).map((e) => e.name);
    expect(names.indexOf('REDIS_PASSWORD')).toBeGreaterThanOrEqual(0);
    expect(names.indexOf('REDIS_PASSWORD')).toBeLessThan(names.indexOf('SYNCAUTH_REDIS_URL'));
    for (const name of ['SYNCAUTH_GRANT_KEY', 'SYNCAUTH_STORE_KEY', 'REDIS_PASSWORD']) expect(envOf(fleetSyncauth, name)?.valueFrom?.secretKeyRef?.name).toBe(secret.metadata.name);
    // The profiles' store, named: the file store in the config dir the init container fills from the Secret.
    expect(envOf(fleetSyncauth, 'SYNCAUTH_STORE')?.value).toBe('file');
    const configDir = envOf(fleetSyncauth, 'SYNCAUTH_CONFIG_DIR')?.value as string;
    const state = fleetSyncauth.volumeMounts?.find((m) => m.mountPath === configDir);
    expect(fleetSeed.volumeMounts).toContainEqual({ name: state?.name, mountPath: configDir });
    expect(fleetSeed.command?.join('\n')).toContain(`${configDir}/syncauth-${NODE_UID}`);
    expect(fleetSeed.securityContext?.runAsUser).toBe(fleetSyncauth.securityContext?.runAsUser);
    const profilesMount = fleetSeed.volumeMounts?.find((m) => m.name !== state?.name);
    expect(profilesMount?.readOnly).toBe(true);
    expect(fleetSyncauth.volumeMounts?.map((m) => m.name)).not.toContain(profilesMount?.name);
    const volume = (fleetPod.volumes as unknown as { name: string; projected?: { sources: { secret?: { name: string } }[] } }[]).find((v) => v.name === profilesMount?.name);
    expect(volume?.projected?.sources.map((source) => source.secret?.name)).toEqual(['syncauth-profiles']);
    // Readiness on /readyz, liveness on /healthz, on the port the daemon listens on.
    expect(flagValue(args, '--listen')).toBe('0.0.0.0:9464');
    expect(fleetSyncauth.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'health' });
    expect(fleetSyncauth.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'health' });
    expect(fleetSyncauth.ports?.find((p) => p.name === 'health')?.containerPort).toBe(9464);
    // A disruption budget over the same pods, one at a time.
    const budget = find('PodDisruptionBudget', 'syncauth-fleet') as Manifest & { spec: { maxUnavailable?: number; selector: { matchLabels: Record<string, string> } } };
    const labels = (fleet.spec as { template: { metadata: { labels: Record<string, string> } } }).template.metadata.labels;
    for (const [key, value] of Object.entries(budget.spec.selector.matchLabels)) expect(labels[key]).toBe(value);
    expect(budget.spec.maxUnavailable).toBe(1);
  });

  it('run the one-shot mode in the Job and the CronJob', () => {
    const once = syncauthOf(job);
    expect(once.args).toEqual(['daemon', '--once']);
    expect(['Never', 'OnFailure']).toContain(podOf(job).restartPolicy);
    const cron = syncauthOf(find('CronJob', 'syncauth-refresh'));
    expect(cron.args).toContain('--once');
    // Hourly: the renewal margin must exceed the interval, or a token could expire between two runs.
    expect(Number(envOf(cron, 'SYNCAUTH_RENEW_MARGIN')?.value)).toBeGreaterThan(3600);
  });
});

// ---- the containers' arguments and environment, run for real ----

const redisCheck = redisAvailability();
let redis: RedisServer | undefined;
const REDIS_PASSWORD = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';
afterAll(async () => {
  await redis?.stop();
});

interface Run {
  child: ReturnType<typeof spawn>;
  out: { stdout: string; stderr: string };
  exited: Promise<number | null>;
}

/**
 * Runs `container` as the image would (its args after the entrypoint), its environment as the manifest gives
 * it, but: secrets from the emulator's grant in place of the Secret's, the service and token endpoint at the
 * emulator, each volume at a temporary directory, Redis at a local server (or no Redis when there is none) and
 * the health server on a free loopback port.
 */
async function runContainer(container: Container, world: { emuUrl: string; tokenUrl: string; secrets: Record<string, string>; workflowId: string }, home: string): Promise<{ run: Run; mounts: Map<string, string> }> {
  const mounts = new Map<string, string>();
  for (const m of container.volumeMounts ?? []) {
    const dir = path.join(home, m.name);
    mkdirSync(dir, { recursive: true });
    // As the kubelet makes an emptyDir under an fsGroup: world-writable, the group's setgid bit on it.
    chmodSync(dir, 0o2777);
    mounts.set(m.mountPath, dir);
  }
  const local = (value: string): string => {
    for (const [mountPath, dir] of mounts) if (value === mountPath || value.startsWith(`${mountPath}/`)) return dir + value.slice(mountPath.length);
    return value;
  };
  const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, SYNCAUTH_TOKEN_URL: world.tokenUrl };
  // As the kubelet does: $(NAME) in a value is the value of a variable defined before it.
  const expand = (value: string): string => value.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name: string) => env[name] ?? whole);
  for (const variable of container.env ?? []) {
    const ref = variable.valueFrom?.secretKeyRef;
    if (ref) {
      const value = world.secrets[ref.key];
      if (value === undefined) throw new Error(`the test's Secret has no key ${ref.key}`);
      env[variable.name] = value;
    } else if (variable.name === 'SYNCAUTH_BASE_URL') env[variable.name] = world.emuUrl;
    else if (variable.name === 'SYNCAUTH_WORKFLOW_ID') env[variable.name] = world.workflowId;
    else if (variable.name === 'SYNCAUTH_NOTIFY_URL') env[variable.name] = 'http://127.0.0.1:9/hook';
    else if (variable.name === 'SYNCAUTH_REDIS_URL') {
      // The manifest's URL, its password expanded, at the local server.
      const url = new URL(expand(variable.value ?? ''));
      if (redis) env[variable.name] = `redis://${url.username}:${url.password}@127.0.0.1:${redis.port}`;
    } else env[variable.name] = local(expand(variable.value ?? ''));
  }
  if (!redis) {
    // One replica without Redis: the page needs no grant key then, and refuses one.
    delete env.SYNCAUTH_GRANT_KEY;
  }
  const args = (container.args ?? []).map((arg, i, all) => (all[i - 1] === '--listen' || all[i - 1] === '--reauth-listen' ? '127.0.0.1:0' : local(arg)));
  expect(container.command).toBeUndefined();
  const child = spawn(process.execPath, [CLI, ...args], { cwd: home, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = { stdout: '', stderr: '' };
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out.stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (out.stderr += d));
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return { run: { child, out, exited }, mounts };
}

async function world() {
  const emu = await emulator({ tokenLifetimeSeconds: 3600 });
  const grant = await obtainGrant(emu);
  const secrets: Record<string, string> = {
    'app-key': grant.appKey,
    'app-secret': grant.appSecret,
    'refresh-token': grant.refreshToken,
    'api-key': DEFAULT_EMULATOR_API_KEY,
    'notify-secret': `whsec_${Buffer.from('kubernetes-test-notify-secret-32').toString('base64')}`,
    'grant-key': Buffer.alloc(32, 3).toString('base64'),
    'redis-password': REDIS_PASSWORD,
  };
  // The workflow the manifests' SYNCAUTH_WORKFLOW_ID placeholder names.
  const client = new ServiceClient({ baseUrl: emu.url, apiKey: DEFAULT_EMULATOR_API_KEY });
  const workflow = await client.createWorkflow({ name: 'ingest', workflow_type: 'basic' }).finally(() => client.close());
  return { emu, grant, secrets, emuUrl: emu.url, tokenUrl: emu.tokenUrl, workflowId: workflow.id };
}

describe('the manifests run the real CLI', () => {
  it(`the sidecar's replicas become ready on their probes' paths, each publishing its token 0640 to the pod's group`, async () => {
    expect(ENTRYPOINT[1]).toBe('/app/dist/cli/main.js');
    if (!redisCheck.skip && redisCheck.executablePath) {
      redis = await startRedisServer(redisCheck);
      // As redis.yaml's Redis: a password is required.
      const admin = new RedisClient(redis.url);
      await admin.config('SET', 'requirepass', REDIS_PASSWORD);
      admin.disconnect();
    } else console.warn(`${redisCheck.reason}: running one replica without SYNCAUTH_REDIS_URL`);
    const w = await world();
    const replicas = redis ? (sidecar.spec as { replicas: number }).replicas : 1;
    const tokenFile = flagValue(syncauth.args ?? [], '--token-file') as string;
    const fsGroup = sidecarPod.securityContext?.fsGroup as number;
    const pods = await Promise.all(Array.from({ length: replicas }, (_, i) => runContainer(syncauth, w, tempDir(`syncauth-pod${i}-`))));
    try {
      for (const { run, mounts } of pods) {
        const start = await waitFor('the start line', () => {
          if (run.child.exitCode !== null) throw new Error(`syncauth exited (${run.child.exitCode}):\n${run.out.stdout}\n${run.out.stderr}`);
          const line = run.out.stdout.split('\n').find((l) => l.includes('daemon started'));
          return line ? (JSON.parse(line) as { listen: string }) : undefined;
        });
        const probes = [syncauth.startupProbe, syncauth.readinessProbe, syncauth.livenessProbe].map((p) => p?.httpGet?.path as string);
        for (const probe of probes) {
          await waitFor(`${probe} to answer 200`, async () => ((await fetch(`${start.listen}${probe}`)).status === 200 ? true : undefined), 20_000);
        }
        // Where the app reads it (its DROPBOX_TOKEN_FILE), for the user this test runs syncauth as.
        const app = sidecarPod.containers.find((c) => c.name === 'app') as Container;
        const appFile = (envOf(app, 'DROPBOX_TOKEN_FILE')?.value as string).replace(`syncauth-${NODE_UID}`, `syncauth-${process.geteuid?.()}`);
        expect(path.dirname(path.dirname(appFile))).toBe(path.dirname(tokenFile));
        let local = appFile;
        for (const [mountPath, dir] of mounts) if (appFile.startsWith(`${mountPath}/`)) local = dir + appFile.slice(mountPath.length);
        const info = statSync(local);
        expect((info.mode & 0o777).toString(8)).toBe('640');
        expect(info.gid).toBe(fsGroup);
        expect(readFileSync(local, 'utf8')).toMatch(/\S/);
        // The re-authorization page listens too, at the public URL the manifest names.
        expect(run.out.stdout).toContain('"event":"reauth.listening"');
        expect(run.out.stdout).toContain(envOf(syncauth, 'SYNCAUTH_PUBLIC_URL')?.value);
      }
      // Each replica holds a token of its own, and the connector was made once.
      const name = defaultConnectorName(envOf(syncauth, 'SYNCAUTH_REMOTE_URL')?.value as string);
      await waitFor('the connector', () => (connectorsNamed(w.emu, name).length > 0 ? true : undefined));
      expect(connectorsNamed(w.emu, name)).toHaveLength(1);
      for (const { run } of pods) run.child.kill('SIGTERM');
      for (const { run } of pods) expect(await run.exited).toBe(0);
    } finally {
      for (const { run } of pods) if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
    }
  }, 60_000);

  it('a pod started while its grant is revoked passes its start-up probe, is NotReady on its readiness probe, and serves the page', async () => {
    const w = await world();
    w.emu.revokeGrant(w.grant.refreshToken);
    const { run } = await runContainer(syncauth, w, tempDir('syncauth-pod-revoked-'));
    try {
      const start = await waitFor('the start line', () => {
        if (run.child.exitCode !== null) throw new Error(`syncauth exited (${run.child.exitCode}):\n${run.out.stdout}\n${run.out.stderr}`);
        const line = run.out.stdout.split('\n').find((l) => l.includes('daemon started'));
        return line ? (JSON.parse(line) as { listen: string }) : undefined;
      });
      await waitFor('the profile parked', () => (run.out.stdout.includes('profile.reauthorization_needed') ? true : undefined), 20_000);
      const status = async (probe: Probe | undefined): Promise<number> => (await fetch(`${start.listen}${probe?.httpGet?.path ?? ''}`)).status;
      // Within the start-up probe's allowance, which the kubelet would otherwise answer by restarting syncauth.
      expect(await status(syncauth.startupProbe)).toBe(200);
      expect(await status(syncauth.readinessProbe)).toBe(503);
      expect(await status(syncauth.livenessProbe)).toBe(200);
      const page = /"event":"reauth.listening"[^\n]*?"listen":"([^"]+)"/.exec(run.out.stdout)?.[1];
      expect(page, run.out.stdout).toBeDefined();
      expect((await fetch(`http://${page as string}/reauthorize/callback`)).status).toBeLessThan(500);
    } finally {
      run.child.kill('SIGTERM');
      await run.exited;
    }
  }, 60_000);

  it("--on-reauthorized patches only the grant's three keys of the one Secret through the API server as the pod's service account, with what the image carries", async () => {
    const command = flagValue(syncauth.args ?? [], '--on-reauthorized') as string;
    // The image has node and syncauth, not kubectl.
    expect(command).not.toMatch(/kubectl/);
    expect(readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8')).not.toMatch(/kubectl/);
    expect(command).toMatch(/^exec node \/app\/dist\/cli\/kube-secret-hook\.js \S+$/);
    // A stand-in API server over TLS, its certificate from a CA of this test's own, as the cluster's.
    const home = tempDir('syncauth-kube-api-');
    const account = path.join(home, 'serviceaccount');
    mkdirSync(account);
    const openssl = (args: string[]) => execFileSync('openssl', args, { cwd: home, stdio: 'pipe' });
    openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', path.join(account, 'ca.crt'), '-days', '2', '-subj', '/CN=test-cluster-ca']);
    openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'api.key', '-out', 'api.csr', '-subj', '/CN=kube-apiserver']);
    writeFileSync(path.join(home, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n');
    openssl(['x509', '-req', '-in', 'api.csr', '-CA', path.join(account, 'ca.crt'), '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'api.crt', '-days', '2', '-extfile', 'san.ext']);
    const saToken = `eyJhbGciOiJSUzI1NiJ9.test-${process.pid}`;
    writeFileSync(path.join(account, 'token'), saToken);
    writeFileSync(path.join(account, 'namespace'), 'apps');
    const seen: { method?: string; url?: string; headers: Record<string, unknown>; body: string }[] = [];
    let answer = 200;
    const server = createHttpsServer({ key: readFileSync(path.join(home, 'api.key')), cert: readFileSync(path.join(home, 'api.crt')) }, (req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      req.on('end', () => {
        seen.push({ method: req.method, url: req.url, headers: req.headers, body });
        res.writeHead(answer, { 'content-type': 'application/json' });
        res.end(answer === 200 ? JSON.stringify({ kind: 'Secret', metadata: { name: 'syncauth', namespace: 'apps' } }) : JSON.stringify({ kind: 'Status', status: 'Failure', reason: 'Forbidden', message: 'secrets "syncauth" is forbidden: User "system:serviceaccount:apps:syncauth" cannot patch resource "secrets"', code: 403 }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as { port: number }).port;
      // As in the image, /app being this checkout; the service account where this test put it.
      const local = `${command.replace('/app/dist/', `${ROOT}/dist/`)} --service-account-dir ${account}`;
      const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(port) };
      const grant = { appKey: 'appkey-7h2k', appSecret: 'appsecret-Qz81', refreshToken: 'refresh-Lm42_x-Yp0' };
      const result = await runGrantHook({ command: local, profile: 'docs', grant, env });
      expect(result, result.output).toMatchObject({ ok: true, exitCode: 0 });
      expect(seen).toHaveLength(1);
      const [request] = seen as [(typeof seen)[number]];
      expect(request.method).toBe('PATCH');
      expect(request.url).toBe(`/api/v1/namespaces/apps/secrets/${secret.metadata.name}`);
      expect(request.headers.authorization).toBe(`Bearer ${saToken}`);
      expect(request.headers['content-type']).toBe('application/merge-patch+json');
      const b64 = (value: string) => Buffer.from(value).toString('base64');
      expect(JSON.parse(request.body)).toEqual({ data: { 'app-key': b64(grant.appKey), 'app-secret': b64(grant.appSecret), 'refresh-token': b64(grant.refreshToken) } });
      for (const value of Object.values(grant)) {
        expect(request.body).not.toContain(value);
        expect(result.output).not.toContain(value);
      }
      expect(result.output).toContain(`Secret apps/${secret.metadata.name}`);
      // The keys it writes are the Secret's, which the replicas read their grant from.
      for (const [variable, key] of [['SYNCAUTH_APP_KEY', 'app-key'], ['SYNCAUTH_APP_SECRET', 'app-secret'], ['SYNCAUTH_REFRESH_TOKEN', 'refresh-token']] as const) {
        expect(envOf(syncauth, variable)?.valueFrom?.secretKeyRef).toEqual({ name: secret.metadata.name, key });
      }
      // Refused (RBAC): the daemon hears of it, with the API server's reason and no value.
      answer = 403;
      const refused = await runGrantHook({ command: local, profile: 'docs', grant, env });
      expect(refused).toMatchObject({ ok: false, exitCode: 1 });
      expect(refused.output).toMatch(/answered 403 .*cannot patch resource "secrets"/);
      for (const value of Object.values(grant)) expect(refused.output).not.toContain(value);
    } finally {
      server.close();
    }
  });

  it.skipIf(redisCheck.skip)("redis.yaml's Redis requires the Secret's password, kept out of its arguments, and its probe passes with it", async () => {
    const redisPod = podOf(find('Deployment', 'syncauth-redis'));
    const container = redisPod.containers[0] as Container;
    const probe = (container.readinessProbe as { exec: { command: string[] } }).exec.command;
    // A port nothing listens on now (a random one collided with another test's server once, and redis-server exited).
    const port = await freePort();
    // Only the port differs from the manifest: the image's default 6379 may be taken here.
    const [shell, flag, script] = container.command as [string, string, string];
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', REDIS_PASSWORD };
    const dir = tempDir('syncauth-redis-yaml-');
    const server = spawn(shell, [flag, script.replace('redis-server -', `redis-server - --port ${port} --bind 127.0.0.1`)], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let output = '';
    server.stdout?.setEncoding('utf8').on('data', (d: string) => (output += d));
    server.stderr?.setEncoding('utf8').on('data', (d: string) => (output += d));
    try {
      const answer = (auth?: string): Promise<string> => new Promise((resolve) => {
        const client = new RedisClient({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, enableReadyCheck: false, retryStrategy: () => null, ...(auth ? { password: auth } : {}) });
        client.on('error', () => undefined);
        client.connect().then(() => client.ping()).then((pong) => resolve(pong), (error: Error) => resolve(error.message)).finally(() => client.disconnect());
      });
      await waitFor('redis-server', async () => {
        if (server.exitCode !== null) throw new Error(`redis-server exited (${server.exitCode}):\n${output}`);
        return (await answer(REDIS_PASSWORD)) === 'PONG' ? true : undefined;
      });
      expect(await answer()).toMatch(/NOAUTH|Authentication required/);
      const { execFileSync } = await import('node:child_process');
      const args = execFileSync('ps', ['-o', 'args=', '--ppid', String(server.pid)], { encoding: 'utf8' });
      expect(args).toContain('redis-server');
      expect(args).not.toContain(REDIS_PASSWORD);
      const probed = spawn(probe[0] as string, [probe[1] as string, (probe[2] as string).replace('redis-cli', `redis-cli -p ${port}`)], { env, stdio: 'ignore' });
      expect(await new Promise((resolve) => probed.once('close', resolve))).toBe(0);
    } finally {
      // The shell and the redis-server it started: their process group, which this test made (gone already if
      // redis-server exited on its own).
      try {
        process.kill(-(server.pid as number), 'SIGKILL');
      } catch {
        // ESRCH: the group is gone already.
      }
    }
  });

  it.skipIf(redisCheck.skip)("the fleet's replicas, each filling its config dir from the profiles' Secret through the init container, serve each profile once between them, and take a stopped replica's share", async () => {
    if (!redis) {
      redis = await startRedisServer(redisCheck);
      const admin = new RedisClient(redis.url);
      await admin.config('SET', 'requirepass', REDIS_PASSWORD);
      admin.disconnect();
    }
    // Profiles made as the operator makes them: `syncauth setup` in the file store, on a machine of theirs.
    const ob = await startOnboarding({ emulator: { tokenLifetimeSeconds: 3600 } });
    const pods: { run: Run }[] = [];
    try {
      const root = tempDir('syncauth-fleet-');
      const made = path.join(root, 'setup-host', 'config');
      mkdirSync(path.dirname(made), { recursive: true });
      const storeKey = 'a-store-key-for-the-fleet-recipe-0123456789';
      const names = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot'];
      for (const name of names) {
        const env = onboardingEnv(ob, { dir: root, configDir: made, storeKey }, { SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob), SYNCAUTH_CONNECTOR_NAME: `dropbox-${name}` });
        const result = await runCli(['setup', '--yes', '--json', '--profile', name], { env, cwd: path.dirname(made), timeoutMs: 30_000 });
        expect(result.code, result.stderr).toBe(0);
      }
      // The Secret's keys, as deploy/README.md's `kubectl create secret generic syncauth-profiles` makes them.
      const secretFiles = path.join(root, 'syncauth-profiles');
      mkdirSync(secretFiles);
      copyFileSync(path.join(made, 'secrets.enc'), path.join(secretFiles, 'keyring'));
      if (existsSync(path.join(made, 'config.json'))) copyFileSync(path.join(made, 'config.json'), path.join(secretFiles, 'config'));
      for (const [dir, suffix] of [['profiles', '.json'], ['secrets', '.enc']] as const) {
        for (const file of readdirSync(path.join(made, dir)).filter((f) => f.endsWith(suffix))) copyFileSync(path.join(made, dir, file), path.join(secretFiles, file));
      }
      const world = {
        emuUrl: ob.emulator.url,
        tokenUrl: ob.emulator.tokenUrl,
        secrets: { 'store-key': storeKey, 'redis-password': REDIS_PASSWORD, 'grant-key': Buffer.alloc(32, 9).toString('base64') },
        workflowId: '',
      };
      const replicas = (fleet.spec as { replicas: number }).replicas;
      const configDir = envOf(fleetSyncauth, 'SYNCAUTH_CONFIG_DIR')?.value as string;
      const secretMount = fleetSeed.volumeMounts?.find((m) => m.mountPath !== configDir)?.mountPath as string;
      for (let i = 0; i < replicas; i += 1) {
        const home = tempDir(`syncauth-fleet-pod${i}-`);
        // The pod's volumes: the Secret's files (read-only to the pod) and the emptyDir, as the kubelet makes it.
        mkdirSync(path.join(home, 'profiles'));
        for (const file of readdirSync(secretFiles)) copyFileSync(path.join(secretFiles, file), path.join(home, 'profiles', file));
        mkdirSync(path.join(home, 'syncauth-state'));
        chmodSync(path.join(home, 'syncauth-state'), 0o2777);
        const script = (fleetSeed.command?.[2] as string)
          .replaceAll(secretMount, path.join(home, 'profiles'))
          .replaceAll(configDir, path.join(home, 'syncauth-state'))
          .replaceAll(`syncauth-${NODE_UID}`, `syncauth-${process.geteuid?.() ?? 0}`);
        expect(fleetSeed.command?.slice(0, 2)).toEqual(['/bin/sh', '-c']);
        const seeded = spawnSync('/bin/sh', ['-c', script], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, encoding: 'utf8' });
        expect(seeded.status, seeded.stderr).toBe(0);
        pods.push(await runContainer(fleetSyncauth, world, home));
      }
      const listens = await Promise.all(pods.map(({ run }) => waitFor('the start line', () => {
        if (run.child.exitCode !== null) throw new Error(`syncauth exited (${run.child.exitCode}):\n${run.out.stdout}\n${run.out.stderr}`);
        const line = run.out.stdout.split('\n').find((l) => l.includes('daemon started'));
        return line ? (JSON.parse(line) as { listen: string }).listen : undefined;
      }, 20_000)));
      const gauges = async (listen: string): Promise<Record<string, number>> => {
        const text = await (await fetch(`${listen}/metrics`)).text();
        return Object.fromEntries([...text.matchAll(/^(syncauth_fleet_[a-z_]+(?:\{[^}]*\})?) (\S+)$/gm)].map((m) => [m[1] as string, Number(m[2])]));
      };
      /** Waits until each listed replica sees `members` and they serve every profile once between them. */
      const settled = (listening: string[], members: number) => waitFor(`${members} replicas sharing the ${names.length} profiles`, async () => {
        const seen = await Promise.all(listening.map(gauges));
        const served = seen.reduce((sum, g) => sum + (g.syncauth_fleet_served_profiles ?? 0), 0);
        const agreed = seen.every((g) => g.syncauth_fleet_members === members && g.syncauth_fleet_shared_profiles === names.length && g['syncauth_fleet_mode{mode="shares"}'] === 1);
        return agreed && served === names.length ? seen : undefined;
      }, 45_000);
      await settled(listens, replicas);
      for (const listen of listens) {
        // Each share's profiles are renewed within the fleet's cap on token requests (its part of 10 a second):
        // ready once they are.
        const ready = await waitFor('the replica ready', async () => {
          const answer = await fetch(`${listen}${fleetSyncauth.readinessProbe?.httpGet?.path ?? ''}`);
          return answer.status === 200 ? answer : undefined;
        }, 45_000);
        // What the operator reads there: this replica's view of the fleet.
        expect(((await ready.json()) as { fleet?: unknown }).fleet).toMatchObject({ members: replicas, mode: 'shares', shared: names.length });
      }
      // One connector per profile, setup's, holding a live token.
      for (const name of names) {
        const connectors = connectorsNamed(ob.emulator, `dropbox-${name}`);
        expect(connectors.map((c) => c.name)).toEqual([`dropbox-${name}`]);
        expect(ob.emulator.state.accessTokens.get(connectors[0]?.config.token as string)?.expiresAt ?? 0).toBeGreaterThan(Date.now());
      }
      // A replica stopped (a rolling update, a drain) leaves at once: the others take its share.
      const [last] = pods.splice(replicas - 1, 1) as [{ run: Run }];
      last.run.child.kill('SIGTERM');
      expect(await last.run.exited).toBe(0);
      await settled(listens.slice(0, replicas - 1), replicas - 1);
      for (const { run } of pods) run.child.kill('SIGTERM');
      for (const { run } of pods) expect(await run.exited).toBe(0);
      for (const { run } of [...pods, last]) expect(run.out.stdout).toContain('"event":"fleet.joined"');
    } finally {
      for (const { run } of pods) if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
      await ob.emulator.close();
    }
  }, 120_000);

  it("the Job's one-shot run exits 0 with the connector holding a fresh token", async () => {
    const w = await world();
    const { run, mounts } = await runContainer(syncauthOf(job), w, tempDir('syncauth-job-'));
    const timer = setTimeout(() => run.child.kill('SIGKILL'), 30_000);
    const code = await run.exited;
    clearTimeout(timer);
    expect(code, `${run.out.stdout}\n${run.out.stderr}`).toBe(0);
    const [connector] = connectorsNamed(w.emu, defaultConnectorName(envOf(syncauthOf(job), 'SYNCAUTH_REMOTE_URL')?.value as string));
    expect(connector?.config.token).toBe(latestTokenOf(w.emu, w.grant.refreshToken)?.token);
    // The state volume, an emptyDir open to all, holds the state in a directory of syncauth's own alone.
    const state = mounts.get(envOf(syncauthOf(job), 'SYNCAUTH_CONFIG_DIR')?.value as string) as string;
    const own = `syncauth-${process.geteuid?.() ?? 0}`;
    expect(readdirSync(state)).toEqual([own]);
    expect(readdirSync(path.join(state, own, 'profiles'))).toContain(`${envOf(syncauthOf(job), 'SYNCAUTH_PROFILE')?.value as string}.json`);
  }, 60_000);
});
