// The image's --on-reauthorized command for Kubernetes, without kubectl:
//
//   node /app/dist/cli/kube-secret-hook.js SECRET [--service-account-dir DIR]
//
// reads the new grant on stdin as the daemon hands it to the command (SYNCAUTH_APP_KEY=…, SYNCAUTH_APP_SECRET=…,
// SYNCAUTH_REFRESH_TOKEN=… lines) and replaces the keys app-key, app-secret and refresh-token of the Secret named
// SECRET in the pod's namespace, through the API server as the pod's service account (exec/kube-secret.ts); the
// Secret's other keys stay as they are. Exit 0 once the API server took the patch, 1 otherwise with one line
// saying why; no value of the grant is ever printed.
import { KubeSecretError, patchSecret } from '../exec/kube-secret.js';

/** The Secret's key for each line of the grant (deploy/kubernetes/secret.example.yaml's names). */
const KEYS: Readonly<Record<string, string>> = { SYNCAUTH_APP_KEY: 'app-key', SYNCAUTH_APP_SECRET: 'app-secret', SYNCAUTH_REFRESH_TOKEN: 'refresh-token' };
const USAGE = 'usage: kube-secret-hook.js SECRET [--service-account-dir DIR] < grant (SYNCAUTH_APP_KEY=, SYNCAUTH_APP_SECRET=, SYNCAUTH_REFRESH_TOKEN= lines)';

async function readStdin(): Promise<string> {
  let text = '';
  for await (const chunk of process.stdin) text += (chunk as Buffer).toString('utf8');
  return text;
}

async function main(argv: string[]): Promise<void> {
  const args = [...argv];
  let serviceAccountDir: string | undefined;
  const at = args.indexOf('--service-account-dir');
  if (at >= 0) {
    serviceAccountDir = args[at + 1];
    if (!serviceAccountDir) throw new KubeSecretError(USAGE);
    args.splice(at, 2);
  }
  const [name, ...rest] = args;
  if (!name || rest.length > 0) throw new KubeSecretError(USAGE);
  const data: Record<string, string> = {};
  for (const line of (await readStdin()).split('\n')) {
    const eq = line.indexOf('=');
    const key = KEYS[line.slice(0, eq)];
    if (eq > 0 && key) data[key] = line.slice(eq + 1);
  }
  const missing = Object.entries(KEYS).filter(([, key]) => !data[key]).map(([variable]) => variable);
  if (missing.length > 0) throw new KubeSecretError(`no ${missing.join(', ')} on stdin: this is run by \`syncauth daemon --on-reauthorized\`, which hands it the new grant`);
  const where = await patchSecret({ name, data, env: process.env, ...(serviceAccountDir ? { serviceAccountDir } : {}) });
  process.stdout.write(`Secret ${where}: ${Object.keys(data).join(', ')} replaced\n`);
}

main(process.argv.slice(2)).catch((error: unknown) => {
  process.stderr.write(`kube-secret-hook: ${error instanceof KubeSecretError ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
