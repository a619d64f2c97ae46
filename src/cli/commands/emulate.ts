// `syncauth emulate`: the emulator as a foreground process, for trying syncauth by hand.
import { ValidationError, type FieldIssue } from '../../errors.js';
import { DEFAULT_APP, connectionSettings, startEmulator, type FaultRoute, type FaultRule } from '../../emulator/index.js';
import type { CommandContext } from '../context.js';

const FAULT_ROUTES: FaultRoute[] = ['authorize', 'token', 'revoke', 'account', 'list_folder', 'sources', 'workflows', 'destinations', 'jobs', '*'];

/** Parses `ROUTE:STATUS[:RATE[:RETRY_AFTER]]`, e.g. `token:503:0.5` or `sources:429:1:2`. */
export function parseFaultRule(text: string, issues: FieldIssue[]): FaultRule | undefined {
  const [route, status, rate, retryAfter, ...rest] = text.split(':');
  const field = `--fault ${text}`;
  if (!route || !FAULT_ROUTES.includes(route as FaultRoute) || rest.length > 0) {
    issues.push({ field, message: `must be ROUTE:STATUS[:RATE[:RETRY_AFTER]] with ROUTE one of ${FAULT_ROUTES.join(', ')}` });
    return undefined;
  }
  const rule: FaultRule = { route: route as FaultRoute };
  if (!status || !/^[45]\d\d$/.test(status)) {
    issues.push({ field, message: 'STATUS must be an HTTP error status from 400 to 599' });
    return undefined;
  }
  rule.status = Number(status);
  if (rate !== undefined) {
    const n = Number(rate);
    if (!(n >= 0 && n <= 1) || rate === '') issues.push({ field, message: 'RATE must be a number from 0 to 1' });
    rule.errorRate = n;
  }
  if (retryAfter !== undefined) {
    if (!/^\d+$/.test(retryAfter)) issues.push({ field, message: 'RETRY_AFTER must be whole seconds' });
    rule.retryAfterSeconds = Number(retryAfter);
  }
  return rule;
}

interface EmulateOptions {
  port: string;
  tokenLifetime: string;
  autoApprove?: boolean;
  fault: string[];
  redirectUri: string[];
}

/** A redirect URI the emulated app also accepts: an absolute http(s) URL without a fragment, as the App Console takes. */
export function parseRedirectUri(text: string, issues: FieldIssue[]): string | undefined {
  const field = `--redirect-uri ${text}`;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    issues.push({ field, message: 'must be an absolute URL, e.g. http://127.0.0.1:8443/reauthorize/callback' });
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') issues.push({ field, message: 'must be an http or https URL' });
  else if (url.hash !== '' || text.includes('#')) issues.push({ field, message: 'must not have a fragment (#…)' });
  else return text;
  return undefined;
}

export async function emulate(context: CommandContext, options: EmulateOptions): Promise<void> {
  const issues: FieldIssue[] = [];
  if (!/^\d+$/.test(options.port) || Number(options.port) > 65535) issues.push({ field: '--port', message: 'must be a port number from 0 to 65535' });
  if (!/^\d+$/.test(options.tokenLifetime) || Number(options.tokenLifetime) < 1) issues.push({ field: '--token-lifetime', message: 'must be whole seconds, at least 1' });
  const faults = options.fault.map((f) => parseFaultRule(f, issues)).filter((f): f is FaultRule => f !== undefined);
  const extra = options.redirectUri.map((u) => parseRedirectUri(u, issues)).filter((u): u is string => u !== undefined);
  if (issues.length) throw new ValidationError(issues);
  const app = { ...DEFAULT_APP, redirectUris: [...new Set([...DEFAULT_APP.redirectUris, ...extra])] };

  const emulator = await startEmulator({
    port: Number(options.port),
    apiKeyHeader: context.settings.values.apiKeyHeader,
    tokenLifetimeSeconds: Number(options.tokenLifetime),
    autoApprove: options.autoApprove === true,
    faults,
    apps: [app],
  });
  const { io } = context;
  // The values printed are the emulator's own fixed stand-ins, not anybody's credentials.
  io.stdout.write(`syncauth emulator listening on ${emulator.url} (Ctrl-C to stop)\n\n`);
  io.stdout.write('Point syncauth at it:\n');
  for (const [name, value] of Object.entries(connectionSettings(emulator))) io.stdout.write(`  export ${name}=${value}\n`);
  if (emulator.seeded) io.stdout.write(`\nSeeded workflow: ${emulator.seeded.workflowId}\n`);
  io.stdout.write(`Registered redirect URI${app.redirectUris.length > 1 ? 's' : ''}: ${app.redirectUris.join(', ')}; app folder Apps/${app.folderName} with subfolders ${Object.keys(app.folders ?? {}).join(', ')}\n`);
  io.stdout.write(`Unlink the app (revoke its grants) at ${emulator.url}/account/connected_apps\n`);

  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  await emulator.close();
  io.stderr.write('emulator stopped\n');
}
