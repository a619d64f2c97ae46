// Keys of one Kubernetes Secret replaced through the API server, as the pod's own service account: what the
// image needs to keep a grant obtained by re-authorization in the Secret its pods read (deploy/kubernetes), with
// no kubectl and no client library. In-cluster configuration as every client reads it: the API server at
// KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT over TLS, trusted through the service account's ca.crt, the
// account's token as the bearer, the pod's namespace from the same directory. One JSON merge patch of `data`
// (values in base64): the named keys are replaced, every other key of the Secret is left as it is. Needs no
// more than `patch` on that one Secret (a Role with resourceNames). No value is ever in an error.
import { createRequire } from 'node:module';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type * as Undici from 'undici';

/** Where Kubernetes mounts a pod's service account (token, ca.crt, namespace). */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
const TIMEOUT_MS = 30_000;
const requireUndici = (): typeof Undici => createRequire(import.meta.url)('undici') as typeof Undici;

export interface SecretPatch {
  /** The Secret's name, in the pod's namespace. */
  name: string;
  /** The keys to set, with their values as text. */
  data: Readonly<Record<string, string>>;
  /** Where KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are read. */
  env: NodeJS.ProcessEnv;
  serviceAccountDir?: string;
  timeoutMs?: number;
}

export class KubeSecretError extends Error {}

async function readAccountFile(dir: string, file: string): Promise<string> {
  try {
    return (await readFile(path.join(dir, file), 'utf8')).trim();
  } catch (error) {
    throw new KubeSecretError(`cannot read the service account's ${file} in ${dir} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}): does the pod mount its service account token there?`);
  }
}

/** Patches the keys into the Secret; resolves with `namespace/name`. */
export async function patchSecret(options: SecretPatch): Promise<string> {
  const { name, data, env } = options;
  if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(name)) throw new KubeSecretError(`"${name}" is not the name of a Kubernetes Secret`);
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) throw new KubeSecretError('KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: this runs in a Kubernetes pod, where the kubelet sets them');
  const dir = options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  const [token, ca, namespace] = await Promise.all([readAccountFile(dir, 'token'), readAccountFile(dir, 'ca.crt'), readAccountFile(dir, 'namespace')]);
  const encoded = Object.fromEntries(Object.entries(data).map(([key, value]) => [key, Buffer.from(value, 'utf8').toString('base64')]));
  const authority = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
  const url = `https://${authority}/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets/${encodeURIComponent(name)}`;
  const { Agent, request } = requireUndici();
  const timeout = options.timeoutMs ?? TIMEOUT_MS;
  const agent = new Agent({ connect: { ca, timeout }, headersTimeout: timeout, bodyTimeout: timeout });
  try {
    const response = await request(url, {
      method: 'PATCH',
      dispatcher: agent,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/merge-patch+json', accept: 'application/json' },
      body: JSON.stringify({ data: encoded }),
      signal: AbortSignal.timeout(timeout),
    });
    const text = await response.body.text();
    if (response.statusCode >= 200 && response.statusCode < 300) return `${namespace}/${name}`;
    // The API server's Status names the reason (forbidden, not found); it echoes no value of the patch.
    let reason = '';
    try {
      reason = String((JSON.parse(text) as { message?: unknown }).message ?? '');
    } catch {
      reason = '';
    }
    throw new KubeSecretError(`the API server answered ${response.statusCode} to the patch of Secret ${namespace}/${name}${reason ? `: ${reason}` : ''}`);
  } catch (error) {
    if (error instanceof KubeSecretError) throw error;
    throw new KubeSecretError(`the patch of Secret ${namespace}/${name} did not reach the API server at ${authority}: ${(error as Error).message}`);
  } finally {
    await agent.close();
  }
}
