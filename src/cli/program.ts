// The command tree. Every command is declared here, cheaply; its code is imported only when it runs,
// so `syncauth --help` costs little more than starting Node.
import { createRequire } from 'node:module';
import { Command, CommanderError, Option } from 'commander';
import { ExitCode } from '../errors.js';
import { addSettingOptions, buildContext, type CommandContext } from './context.js';
import { InterruptedError, interruptedExitCode, interruptSignal, type SignalPolicy } from './interrupt.js';
import type { Factory } from './factory.js';
import { reportError } from './output.js';
import { DESTINATION_TYPES, SCHEDULES, SOURCE_TYPES, WORKFLOW_TYPES } from '../service/constants.js';

const { version } = createRequire(import.meta.url)('../../package.json') as { version: string };

// Flags that would carry a secret. They are refused before parsing, without echoing the value: argv is
// visible to every user of the machine (`ps`) and lands in shell history.
const SECRET_FLAGS: Record<string, string> = {
  '--api-key': 'SYNCAUTH_API_KEY',
  '--app-key': 'SYNCAUTH_APP_KEY',
  '--app-secret': 'SYNCAUTH_APP_SECRET',
  '--refresh-token': 'SYNCAUTH_REFRESH_TOKEN',
  '--store-key': 'SYNCAUTH_STORE_KEY',
  '--notify-secret': 'SYNCAUTH_NOTIFY_SECRET',
  '--token': 'a prompt or stdin',
};

function refusedSecretFlag(argv: string[]): string | undefined {
  for (const arg of argv) {
    if (arg === '--') return undefined;
    const name = arg.split('=')[0] ?? arg;
    if (name in SECRET_FLAGS) return name;
  }
  return undefined;
}

type Runner = (context: CommandContext, ...args: unknown[]) => Promise<void>;

/**
 * An action that imports its command module only when invoked. `signals` says how the command meets Ctrl-C
 * and SIGTERM (see interrupt.ts), or `own` for a command that handles them itself.
 */
function lazyWith(factory: Factory) {
  return (load: () => Promise<Record<string, unknown>>, exportName: string, signals: SignalPolicy | 'own' = 'exit') => async (...args: unknown[]): Promise<void> => {
    // Given back when the command is done, so that commands run one after another in one process (tests)
    // do not pile up handlers.
    const release = signals === 'own' ? undefined : factory.signals.handle(signals);
    try {
      const command = args[args.length - 1] as Command;
      const positional = args.slice(0, -2);
      const context = await buildContext(command, factory);
      const module = await load();
      const run = module[exportName] as Runner;
      await run(context, ...positional, command.opts());
    } finally {
      release?.();
    }
  };
}

/** Columns the help is wrapped at. */
export const HELP_WIDTH = 80;

const SERVICE_SETTINGS = ['profile', 'configDir', 'store', 'baseUrl', 'apiKeyHeader'] as const;

function jsonOption(command: Command): Command {
  return command.option('--json', 'print machine-readable JSON');
}

/** The top-level commands, in the order of the help. */
export const COMMAND_NAMES = ['setup', 'authorize', 'token', 'reauth-link', 'status', 'refresh', 'logout', 'exec', 'daemon', 'notify',
  'source', 'workflow', 'jobs', 'destination', 'profile', 'demo', 'emulate', 'doctor', 'completion'] as const;
export type CommandName = (typeof COMMAND_NAMES)[number];

/**
 * The command tree: every command, or with `only` that top-level command alone (with all its subcommands and
 * options), for a run that names it first. Its own help, errors and suggestions are the same either way: they
 * never name a sibling.
 */
export function buildProgram(factory: Factory, only?: CommandName): Command {
  const lazy = lazyWith(factory);
  const declared = (name: CommandName): boolean => only === undefined || only === name;
  const program = new Command('syncauth')
    .description('Onboard a Dropbox app folder into the ingestion service and keep its OAuth tokens fresh.')
    .version(version, '-V, --version')
    .option('--no-color', 'no colour in the output (as NO_COLOR=1)')
    .showHelpAfterError('(run with --help for usage)')
    // Both settings pass to subcommands only when set before those are created.
    .exitOverride()
    // One width everywhere, the terminal's or not: the top-level help is rendered once, when the package is
    // built (help-cache.ts), and must read the same as the help of a run.
    .configureHelp({ helpWidth: HELP_WIDTH })
    .configureOutput({ writeOut: (text) => factory.io.stdout.write(text), writeErr: (text) => factory.io.stderr.write(text) })
    .addHelpText('after', `
Secrets (SYNCAUTH_API_KEY, SYNCAUTH_APP_KEY, SYNCAUTH_APP_SECRET, SYNCAUTH_REFRESH_TOKEN) are read from the environment,
the secret store, a .env file or stdin, never from flags; SYNCAUTH_STORE_KEY from the environment only. Exit codes: 0 ok, 1 error, 2 bad input, 4 authentication needed,
130 interrupted (Ctrl-C), 143 stopped by SIGTERM.`);

  const ONBOARDING = ['profile', 'configDir', 'store', 'baseUrl', 'apiKeyHeader', 'remoteUrl', 'recursive', 'access', 'connectorName',
    'workflowId', 'schedule', 'authorizeUrl', 'tokenUrl', 'dropboxApiUrl', 'redirectUri'] as const;
  const DROPBOX = ['profile', 'configDir', 'store', 'tokenUrl', 'dropboxApiUrl'] as const;
  const flowOptions = (command: Command) => command
    .option('--no-browser', 'paste mode: no redirect; Dropbox shows a code and you paste it here (headless hosts)')
    .option('--no-open', 'loopback mode without starting a browser; open the printed URL yourself')
    .option('--timeout <seconds>', 'how long to wait for the browser to come back', '300');
  const scheduleHelp = `named schedule, one of: ${SCHEDULES.join(', ')}`;

  if (declared('setup')) {
    flowOptions(jsonOption(addSettingOptions(program.command('setup'), [...ONBOARDING, 'publicUrl'])))
      .description('onboard a Dropbox app folder: authorize, store the secrets, create the connector, wire the workflow')
      .option('-y, --yes', 'never prompt: take everything from flags, the environment and .env, and fail naming what is missing')
      .option('--no-check', "skip the service's connection check of the connector (run `syncauth source check ID` later)")
      .option('--no-workflow', 'the connector alone: no workflow question, and a re-run drops the workflow the profile had')
      .option('--adopt', 'take over an existing connector of the same name that may not be this profile\'s (asked at a terminal)')
      .addHelpText('after', `
Secrets (SYNCAUTH_API_KEY, SYNCAUTH_APP_KEY, SYNCAUTH_APP_SECRET) come from the environment, .env or hidden
prompts. With SYNCAUTH_REFRESH_TOKEN set, the browser step is skipped (containers, CI).

Everything that can be checked is checked before the browser opens: the service and API key, the workflow, the
store, the app key and redirect URI. In a terminal, setup asks for what is missing and for the workflow (one of the
workspace's, a new one, or none). Run again on an existing profile, it shows what changes and asks (--yes accepts);
a connector of the same name that is not this profile's is taken over only when you say so (--adopt).

Examples:
  syncauth setup                                          # asks for what it needs, opens the browser
  syncauth setup --no-browser                             # on a server: paste the code Dropbox shows
  SYNCAUTH_BASE_URL=https://platform.example.com SYNCAUTH_REMOTE_URL=dropbox://data \\
    syncauth setup --workflow-id 6f1c9a2e-8d4b-4c3a-9e7f-2b5d8c1a0e93 --schedule "every 4 hours" --yes`)
      .action(lazy(() => import('./commands/setup.js'), 'setup', 'unwind'));
  }
  if (declared('authorize')) {
    flowOptions(jsonOption(addSettingOptions(program.command('authorize'), ['authorizeUrl', 'tokenUrl', 'redirectUri'])))
      .description('only the OAuth flow, on a machine with a browser; prints the refresh token for another host')
      .addHelpText('after', '\nThen, on the headless host (paste the printed token at the silent prompt; it stays out of shell history):\n  read -rs SYNCAUTH_REFRESH_TOKEN && export SYNCAUTH_REFRESH_TOKEN && syncauth setup --yes')
      .action(lazy(() => import('./commands/authorize.js'), 'authorize', 'unwind'));
  }
  if (declared('token')) {
    addSettingOptions(program.command('token'), [...DROPBOX])
      .description('print a valid access token alone on stdout (renewed first), for scripts')
      .option('--force', 'renew even when the stored access token still has more than the margin to live')
      .addHelpText('after', '\nExample:\n  curl -H "Authorization: Bearer $(syncauth token)" -X POST https://api.dropboxapi.com/2/users/get_current_account')
      .action(lazy(() => import('./commands/token.js'), 'token'));
  }
  if (declared('reauth-link')) {
    addSettingOptions(program.command('reauth-link'), ['profile', 'configDir', 'publicUrl', 'reauthLinkTtl', 'redisUrl'])
      .description("mint a link to the daemon's re-authorization page for a profile and print it on stdout (a credential)")
      .option('--allow-account-change', 'the link may move the profile to another Dropbox account')
      .addHelpText('after', `
The link is PUBLIC_URL/reauthorize/<token>, valid for --reauth-link-ttl (default 72h); only a digest of it is kept.
Whoever opens it can give the profile a new grant of its own Dropbox account: send it only to that account's owner.

Example:
  syncauth reauth-link --profile docs --public-url https://syncauth.example.com`)
      .action(lazy(() => import('./commands/reauth-link.js'), 'reauthLink'));
  }
  if (declared('status')) {
    jsonOption(addSettingOptions(program.command('status'), ['profile', 'configDir', 'redisUrl']))
      .description('every profile: token expiry, connector, workflow, last renewal and error; exit 4 if one needs re-authorization')
      .action(lazy(() => import('./commands/status.js'), 'status'));
  }
  if (declared('refresh')) {
    jsonOption(addSettingOptions(program.command('refresh'), [...DROPBOX, 'baseUrl', 'apiKeyHeader']))
      .description('renew the access token now and update the connector with it')
      .action(lazy(() => import('./commands/refresh.js'), 'refresh'));
  }
  if (declared('logout')) {
    addSettingOptions(program.command('logout'), [...DROPBOX])
      .description("revoke the grant at Dropbox and delete the profile's secrets and state")
      .option('--no-revoke', 'delete locally only, leave the grant valid')
      .action(lazy(() => import('./commands/logout.js'), 'logout'));
  }
  if (declared('exec')) {
    addSettingOptions(program.command('exec'), [...DROPBOX, 'renewMargin', 'logLevel'])
      .description('run a command with a fresh access token in its environment (and none of the secrets)')
      .argument('[command...]', 'the command and its arguments, after --')
      .option('--env-name <name>', 'variable that holds the token; its expiry (RFC 3339) goes in <name>_EXPIRES_AT', 'DROPBOX_ACCESS_TOKEN')
      .option('--watch', 'keep the token fresh: renew it inside the margin, then restart the command (or send --signal)')
      .option('--signal <signal>', 'with --watch: send this signal (e.g. HUP, USR1) instead of restarting; the command re-reads a template or runs `syncauth token`')
      .option('--kill-timeout <seconds>', 'SIGKILL the command and its descendants this long after the signal that ends them (0: never kill, wait)', '10')
      .option('--clean-env', 'recommended: give the command only PATH, HOME, LANG, TZ, the token variables and --pass-env names')
      .option('--pass-env <name>', 'with --clean-env: pass this variable too, unless it holds a secret (repeatable)',
        (value: string, previous: string[] | undefined) => [...(previous ?? []), value])
      .option('--template <SRC:DEST[:MODE]>', 'render SRC to DEST (mode default 0600) before the command starts and after each renewal (repeatable)',
        (value: string, previous: string[] | undefined) => [...(previous ?? []), value])
      .addHelpText('after', `
The token is obtained before the command starts, as \`syncauth token\` gets it (shared with it and a daemon;
the connector is not reconciled); a failure exits with the usual code (4: authorize again) and starts nothing.
The command runs directly (no shell) with stdio inherited, in exec's own session (a terminal keeps working),
with DROPBOX_ACCESS_TOKEN and DROPBOX_ACCESS_TOKEN_EXPIRES_AT, and with the environment less every SYNCAUTH_*
secret and any variable holding a secret: raw, URL-encoded, JSON-escaped, base64, base64url, hex, HTTP Basic,
also inside up to 4 layers of those encodings. Recommended: --clean-env (PATH, HOME, LANG, TZ, the token
variables and --pass-env names only).

Exit code: the command's; 128+N if signal N ended it; 127 if it was not found, 126 if it cannot be run.
SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are forwarded to it. exec owns the command's whole tree:
on SIGINT/SIGTERM every descendant gets SIGTERM, and so does whatever the command leaves running when it
ends; what still runs --kill-timeout later is sent SIGKILL (changed: before, exec never killed
after a forwarded signal; --kill-timeout 0 keeps that, waiting as long as it takes). exec exits once all of it
is gone. Descendants are found through /proc, remembered even once orphaned; a process started and orphaned
within a quarter second (a fast daemonizing double fork) escapes. In a terminal, Ctrl-C also reaches it directly.

--watch checks the clock every min(30 s, margin/4) and renews when the token is inside the renew margin. By
default it then ends the command's tree (SIGTERM, SIGKILL after --kill-timeout) and starts it with the new token; with --signal
the command keeps running and gets the signal after the templates are rendered. Failed renewals are retried
(1 s, doubling) while the command keeps its token; a command that exits ends exec with its code.
Templates use {{ access_token }}, {{ expires_at }}, {{ expires_at_unix }}, {{ expires_in }}, {{ profile }}, {{ account_id }}.

Examples:
  syncauth exec --profile docs --watch -- python3 worker.py            # restarted with each new token
  syncauth exec --clean-env --pass-env PYTHONPATH -- python3 worker.py # nothing but what it needs
  syncauth exec --watch --signal HUP --template rclone.conf.tpl:/run/app/rclone.conf:0600 -- ./app --config /run/app/rclone.conf`)
      .action(lazy(() => import('./commands/exec.js'), 'exec', 'own'));
  }

  if (declared('daemon')) {
    addSettingOptions(program.command('daemon'), ['configDir', 'store', 'renewMargin', 'sweep', 'tokenFile', 'tokenFileMode', 'tokenFileGroup', 'socket', 'listen', 'reauthListen', 'publicUrl', 'reauthLinkTtl', 'redisUrl', 'onReauthorized', 'logLevel', 'config', 'notifyFormat', 'notifyConnectorFailingAfter'])
      .description("the sidecar: keep every profile's access token fresh and its connector reconciled, report health")
      // Repeatable, so not registered through addSettingOptions (one value per setting there).
      .option('--profile <name>', 'serve this profile (repeatable; default: every stored profile, or one made of SYNCAUTH_* variables)',
        (value: string, previous: string[] | undefined) => [...(previous ?? []), value])
      .option('--concurrency <n>', 'renewals and reconciles running at once across profiles (default 4)')
      .option('--max-renewals-per-second <n>', 'cap on token requests per second across profiles (default: no cap; with --fleet the fleet\'s cap, shared by its live replicas, default 10)')
      .option('--check-interval <duration>', "check each profile's published token with Dropbox this often, so a revoked grant is seen before the next renewal (default 15m; 0 or off: never)")
      .option('--max-checks-per-second <n>', 'cap on token checks per second, per daemon and per Dropbox account (default 1)')
      .option('--shutdown-timeout <seconds>', 'how long SIGTERM and SIGINT wait for in-flight work (default 10)')
      .option('--fleet', 'share the profiles this replica publishes nowhere among the replicas of one Redis: each is renewed, checked and reconciled by one of them (needs --redis-url and SYNCAUTH_GRANT_KEY; docs/daemon.md, "Fleets")')
      .option('--once', 'one pass: renew what is due, reconcile, publish, then exit: 0 when every profile is fresh, 4 when one needs re-authorization, 1 otherwise')
      .option('--template <SRC:DEST[:MODE]>', 'render DEST from the template SRC after each renewal (repeatable; MODE default 0600; fields in docs/daemon.md)',
        (value: string, previous: string[] | undefined) => [...(previous ?? []), value])
      .option('--socket-mode <mode>', 'mode of the --socket file (default 0600; 0660 with --socket-group lets that group ask)')
      .option('--socket-group <group>', "the --socket file's group (name or id)")
      .option('--notify-url <url>', 'send a signed notice here when a person is needed (repeatable; env SYNCAUTH_NOTIFY_URL, comma-separated; https, or http to this machine)',
        (value: string, previous: string[] | undefined) => [...(previous ?? []), value])
      .addHelpText('after', `
Renews each token when its remaining life falls inside the margin (15 min by default, with jitter), updates
the connector with it, backs off on failures and parks a profile whose grant was revoked until it is set up
again. SIGTERM/SIGINT stop it cleanly; SIGHUP reloads the profiles.

--config FILE (YAML or JSON; every key in deploy/syncauth.yaml) gives the profiles, sinks and daemon settings
in one file; a flag or variable wins over the file's key (logged at start). SIGHUP reads the file again: a file
with any problem is rejected and logged, the daemon keeps running as it was; a good one changes the profiles
served at once, while changed sinks and daemon settings are logged as needing a restart.

Notices (--notify-url): profile.reauthorization_needed (reminded after 24 h and 72 h while it lasts),
profile.reauthorized, connector.failing (reconciles failing past --notify-connector-failing-after, 900 s by
default) and token.unavailable (no live token for longer than the margin), each signed as Standard Webhooks
with SYNCAUTH_NOTIFY_SECRET (whsec_..., from the environment or .env; optional for --notify-format slack).
They never hold a token; undelivered ones wait in an outbox (the config dir, or Redis with --redis-url) and are
retried for 24 h. Try the URLs with \`syncauth notify test\`. See docs/notices.md.

Examples:
  syncauth daemon --listen 127.0.0.1:9464                    # every stored profile; /healthz /readyz /metrics
  syncauth daemon --profile docs --token-file /run/syncauth/token
  syncauth daemon --token-file '/run/syncauth/{profile}.token' --redis-url redis://127.0.0.1:6379
  syncauth daemon --config /etc/syncauth/syncauth.yaml
  SYNCAUTH_NOTIFY_SECRET=whsec_... syncauth daemon --notify-url https://hooks.example.com/syncauth`)
      .action(lazy(() => import('./commands/daemon.js'), 'daemon', 'own'));
  }

  if (declared('notify')) {
    const notify = program.command('notify').description('the notices the daemon sends when a person is needed (webhooks)');
    jsonOption(addSettingOptions(notify.command('test'), ['notifyFormat']))
      .description('send a signed test notice to each notice URL and say what each answered')
      .option('--notify-url <url>', 'send it here (repeatable; default: SYNCAUTH_NOTIFY_URL, comma-separated)',
        (value: string, previous: string[] | undefined) => [...(previous ?? []), value])
      .addHelpText('after', `
Sends one event of type syncauth.test, signed with SYNCAUTH_NOTIFY_SECRET exactly as the daemon signs its
notices (webhook-id, webhook-timestamp, webhook-signature), to each URL, and prints each URL's origin with the
HTTP status it answered or why there was no answer. Exit 0 when every URL answered 2xx, 1 otherwise, 2 when a
URL, the format or the secret is not valid (nothing is sent then). A 401 or 403 usually means the receiver
checks the signature with another secret. Nothing is queued: a failed test is not retried.

Examples:
  SYNCAUTH_NOTIFY_SECRET=whsec_... syncauth notify test --notify-url https://hooks.example.com/syncauth
  SYNCAUTH_NOTIFY_URL=https://hooks.slack.com/services/... syncauth notify test --notify-format slack`)
      .action(lazy(() => import('./commands/notify.js'), 'notifyTest'));
  }

  if (declared('source')) {
    const loadSource = () => import('./commands/source.js');
    const source = program.command('source').description('create, inspect, update and delete source connectors of any of the 21 types');
    const typeList = `one of: ${SOURCE_TYPES.join(', ')}`;
    jsonOption(addSettingOptions(source.command('create'), [...SERVICE_SETTINGS]))
      .description('create a source connector from a JSON config (validated for its type before anything is sent)')
      .requiredOption('--type <type>', `connector type, ${typeList}`)
      .requiredOption('--name <name>', 'connector name, unique in the workspace')
      .requiredOption('--config <file>', 'JSON file with the config object, or - for stdin')
      .addHelpText('after', '\nExample:\n  syncauth source create --type dropbox --name docs --config dropbox.json\n  echo \'{"remote_url":"s3://bucket/path","anonymous":true}\' | syncauth source create --type s3 --name bucket --config -')
      .action(lazy(loadSource, 'createSource'));
    jsonOption(addSettingOptions(source.command('get'), [...SERVICE_SETTINGS]))
      .description('show one source connector (secret fields masked)')
      .argument('<id>', 'connector id (uuid)')
      .action(lazy(loadSource, 'getSource'));
    jsonOption(addSettingOptions(source.command('list'), [...SERVICE_SETTINGS]))
      .description('list source connectors')
      .option('--type <type>', `only this type, ${typeList}`)
      .action(lazy(loadSource, 'listSources'));
    jsonOption(addSettingOptions(source.command('update'), [...SERVICE_SETTINGS]))
      .description("replace a connector's whole config (name and type cannot change)")
      .argument('<id>', 'connector id (uuid)')
      .requiredOption('--config <file>', 'JSON file with the complete new config, or - for stdin')
      .option('--type <type>', "the connector's type, to validate without looking it up first")
      .action(lazy(loadSource, 'updateSource'));
    addSettingOptions(source.command('delete'), [...SERVICE_SETTINGS])
      .description('delete a source connector')
      .argument('<id>', 'connector id (uuid)')
      .option('-y, --yes', 'do not ask for confirmation')
      .action(lazy(loadSource, 'deleteSource'));
    jsonOption(addSettingOptions(source.command('check'), [...SERVICE_SETTINGS]))
      .description("run the service's connection check of a connector and wait for the result; exit 1 when it fails")
      .argument('<id>', 'connector id (uuid)')
      .addHelpText('after', '\nExample:\n  syncauth source check 3fa85f64-5717-4562-b3fc-2c963f66afa6')
      .action(lazy(loadSource, 'checkSource'));
  }

  if (declared('workflow')) {
    const loadWorkflow = () => import('./commands/workflow.js');
    const workflow = program.command('workflow').description('inspect and update workflows');
    jsonOption(addSettingOptions(workflow.command('get'), [...SERVICE_SETTINGS]))
      .description('show one workflow')
      .argument('<id>', 'workflow id (uuid)')
      .action(lazy(loadWorkflow, 'getWorkflow'));
    jsonOption(addSettingOptions(workflow.command('list'), [...SERVICE_SETTINGS]))
      .description('list workflows')
      .action(lazy(loadWorkflow, 'listWorkflows'));
    jsonOption(addSettingOptions(workflow.command('update'), [...SERVICE_SETTINGS]))
      .description('update a workflow; the request carries exactly the fields given')
      .argument('<id>', 'workflow id (uuid)')
      .option('--name <name>', 'new workflow name')
      .option('--source-id <uuid>', 'source connector to read from')
      .option('--destination-id <uuid>', 'destination connector to write to')
      .addOption(new Option('--workflow-type <type>', 'workflow type').choices(WORKFLOW_TYPES))
      .option('--nodes <file>', 'JSON file with the workflow_nodes array, or - for stdin')
      .addOption(new Option('--schedule <schedule>', scheduleHelp).conflicts('clearSchedule'))
      .option('--clear-schedule', 'remove the schedule (sends "schedule": null)')
      .option('--reprocess-all', 'reprocess every file on the next run')
      .option('--no-reprocess-all', 'process only new or changed files')
      .addHelpText('after', '\nExample:\n  syncauth workflow update 3fa85f64-5717-4562-b3fc-2c963f66afa6 --source-id 9b2c7e1d-4f3a-4b8e-a6d2-1c5f0e8b7a94 --schedule "every 4 hours"')
      .action(lazy(loadWorkflow, 'updateWorkflow'));
    jsonOption(addSettingOptions(workflow.command('run'), [...SERVICE_SETTINGS]))
      .description('start a job of the workflow now (the service starts none while one is still running)')
      .argument('<id>', 'workflow id (uuid)')
      .addHelpText('after', '\nExample:\n  syncauth workflow run 3fa85f64-5717-4562-b3fc-2c963f66afa6 && syncauth jobs list --workflow 3fa85f64-5717-4562-b3fc-2c963f66afa6')
      .action(lazy(loadWorkflow, 'runWorkflow'));
  }

  if (declared('jobs')) {
    const loadJobs = () => import('./commands/jobs.js');
    const jobs = program.command('jobs').description("list, inspect and cancel the jobs of workflows' runs");
    jsonOption(addSettingOptions(jobs.command('list'), [...SERVICE_SETTINGS]))
      .description('list jobs, newest first')
      .option('--workflow <id>', 'only the jobs of this workflow (uuid)')
      .option('--status <status>', 'only jobs in this state: scheduled, in_progress, completed, stopped, failed')
      .addHelpText('after', '\nExample:\n  syncauth jobs list --workflow 3fa85f64-5717-4562-b3fc-2c963f66afa6 --status failed')
      .action(lazy(loadJobs, 'listJobs'));
    jsonOption(addSettingOptions(jobs.command('show'), [...SERVICE_SETTINGS]))
      .description('show one job')
      .argument('<id>', 'job id (uuid)')
      .addHelpText('after', '\nExample:\n  syncauth jobs show 0d3c4b5a-6f7e-4d8c-9b0a-1c2d3e4f5a6b --json')
      .action(lazy(loadJobs, 'showJob'));
    jsonOption(addSettingOptions(jobs.command('cancel'), [...SERVICE_SETTINGS]))
      .description('ask the service to stop a running job')
      .argument('<id>', 'job id (uuid)')
      .addHelpText('after', '\nExample:\n  syncauth jobs cancel 0d3c4b5a-6f7e-4d8c-9b0a-1c2d3e4f5a6b')
      .action(lazy(loadJobs, 'cancelJob'));
  }

  if (declared('destination')) {
    const loadDestination = () => import('./commands/destination.js');
    const destination = program.command('destination').description('create, inspect and delete destination connectors');
    jsonOption(addSettingOptions(destination.command('list'), [...SERVICE_SETTINGS]))
      .description('list destination connectors')
      .option('--type <type>', `only this type, one of: ${DESTINATION_TYPES.join(', ')}`)
      .addHelpText('after', '\nExample:\n  syncauth destination list --type s3')
      .action(lazy(loadDestination, 'listDestinations'));
    jsonOption(addSettingOptions(destination.command('show'), [...SERVICE_SETTINGS]))
      .description('show one destination connector (secret fields masked)')
      .argument('<id>', 'connector id (uuid)')
      .addHelpText('after', '\nExample:\n  syncauth destination show 6ec0bd7f-11c0-43da-975e-2a8ad9ebae0b')
      .action(lazy(loadDestination, 'showDestination'));
    jsonOption(addSettingOptions(destination.command('create'), [...SERVICE_SETTINGS]))
      .description('create a destination connector from a JSON config')
      .requiredOption('--type <type>', `connector type, one of: ${DESTINATION_TYPES.join(', ')}`)
      .requiredOption('--name <name>', 'connector name, unique in the workspace')
      .requiredOption('--config <file>', 'JSON file with the config object, or - for stdin')
      .addHelpText('after', '\nExample:\n  syncauth destination create --type s3 --name output --config s3.json\n  echo \'{"remote_url":"s3://bucket/output","anonymous":true}\' | syncauth destination create --type s3 --name output --config -')
      .action(lazy(loadDestination, 'createDestination'));
    addSettingOptions(destination.command('delete'), [...SERVICE_SETTINGS])
      .description('delete a destination connector')
      .argument('<id>', 'connector id (uuid)')
      .option('-y, --yes', 'do not ask for confirmation')
      .addHelpText('after', '\nExample:\n  syncauth destination delete 6ec0bd7f-11c0-43da-975e-2a8ad9ebae0b --yes')
      .action(lazy(loadDestination, 'deleteDestination'));
  }

  if (declared('profile')) {
    const loadProfile = () => import('./commands/profile.js');
    const profile = program.command('profile').description("change a profile without a new authorization: its settings, one of its secrets, the file store's key");
    jsonOption(addSettingOptions(profile.command('set'), ['profile', 'configDir', 'store']))
      .description("change a profile's settings in its state; checked with the service first, applied by `refresh` or a daemon reload")
      .option('--workflow-id <uuid>', 'wire this workflow (it must exist for the profile\'s API key)')
      .option('--no-workflow', 'stop wiring a workflow (the workflow on the service is left as it is)')
      .option('--schedule <schedule>', `${scheduleHelp}; needs a workflow`)
      .option('--clear-schedule', 'stop setting a schedule (the one on the service is left as it is)')
      .option('--connector-name <name>', 'name of the source connector (a new one is made under it at the next refresh)')
      .option('--remote-url <url>', 'dropbox://<subfolder> to read (the folder must exist)')
      .option('--recursive', 'read subfolders too')
      .option('--no-recursive', 'do not read subfolders')
      .addHelpText('after', `
Only the flags given change. \`syncauth refresh\` applies the change to the connector and workflow now; a
running daemon takes it up when reloaded (SIGHUP) and applies it at its next renewal.

Examples:
  syncauth profile set --profile docs --workflow-id 3fa85f64-5717-4562-b3fc-2c963f66afa6 --schedule "every 4 hours"
  syncauth profile set --profile docs --no-workflow`)
      .action(lazy(loadProfile, 'profileSet'));
    addSettingOptions(profile.command('rotate'), ['profile', 'configDir', 'store'])
      .description('replace the service API key or the Dropbox app secret of a profile, after checking the new one')
      .addArgument(program.createArgument('<secret>', 'which secret').choices(['api-key', 'app-secret']))
      .addHelpText('after', `
The new value is asked with hidden input on a terminal, or read as one line from stdin; never from a flag.
An API key is checked with one read from the service, an app secret with one token renewal at Dropbox; a value
they refuse is not stored.

Examples:
  syncauth profile rotate api-key --profile docs
  printf '%s\\n' "$NEW_API_KEY" | syncauth profile rotate api-key --profile docs`)
      .action(lazy(loadProfile, 'profileRotate'));
    addSettingOptions(profile.command('rekey'), ['configDir', 'store'])
      .description('re-encrypt the encrypted file store (SYNCAUTH_STORE=file) under a new key')
      .addHelpText('after', `
The current key comes from SYNCAUTH_STORE_KEY; the new one (at least 16 characters) is asked twice with hidden
input on a terminal, or read as one line from stdin. The file is replaced in one step: a crash leaves it
readable with the old key or with the new one. Afterwards set SYNCAUTH_STORE_KEY to the new key everywhere.

Example:
  NEW_KEY=$(openssl rand -base64 32); printf '%s\\n' "$NEW_KEY" | syncauth profile rekey   # then put $NEW_KEY where the old key was`)
      .action(lazy(loadProfile, 'profileRekey'));
  }

  if (declared('demo')) {
    program.command('demo')
      .description('run the main job end to end on the built-in emulator: no accounts, no network')
      .option('--browser', "approve in your own browser instead of automatically")
      .option('--reauth', 'then the re-authorization loop: the daemon with its page and signed notices, the app unlinked at Dropbox, the link opened and Allow clicked')
      .action(lazy(() => import('./commands/demo.js'), 'demo', 'unwind'));
  }

  if (declared('emulate')) {
    addSettingOptions(program.command('emulate'), ['apiKeyHeader'])
      .description('run a local stand-in for the service and for Dropbox OAuth, for trying syncauth without accounts')
      .option('--port <port>', 'port on 127.0.0.1 (0 picks a free one)', '8765')
      .option('--token-lifetime <seconds>', 'access-token lifetime', '14400')
      .option('--auto-approve', 'approve authorize requests without showing the page')
      .option('--fault <rule>', 'inject failures: ROUTE:STATUS[:RATE[:RETRY_AFTER]], e.g. token:503:0.5 (repeatable)', (v: string, prev: string[]) => [...prev, v], [] as string[])
      .option('--redirect-uri <url>', "also accept this redirect URI for the app, e.g. the daemon's PUBLIC_URL/reauthorize/callback (repeatable)", (v: string, prev: string[]) => [...prev, v], [] as string[])
      .addHelpText('after', `
The app accepts http://127.0.0.1:53682/callback (setup's default) and every --redirect-uri. To meet a grant
Dropbox no longer honours, unlink the app as its owner would: open URL/account/connected_apps and click
Disconnect, or from a script (every grant of the app for the default account is revoked):
  curl -s -X POST -d app_key=emu1appkey2k3y4 URL/account/connected_apps/disconnect
The one grant behind an access token is revoked as an app revokes it, with Dropbox's own route:
  curl -s -X POST -H "Authorization: Bearer $(syncauth token)" URL/2/auth/token/revoke

Example (the loop of the re-authorization page, the daemon's page on 127.0.0.1:8443):
  syncauth emulate --redirect-uri http://127.0.0.1:8443/reauthorize/callback`)
      .action(lazy(() => import('./commands/emulate.js'), 'emulate', 'own'));
  }

  if (declared('doctor')) {
    jsonOption(addSettingOptions(program.command('doctor'), ['profile', 'configDir', 'store', 'baseUrl', 'apiKeyHeader', 'tokenFile', 'socket', 'listen']))
      .description('check the secret store, config directory, profiles, service and API key, and a running daemon; say what to fix')
      .option('--template <SRC:DEST[:MODE]>', "check where the daemon's template would render DEST (repeatable)", (value: string, previous: string[] | undefined) => [...(previous ?? []), value])
      .addHelpText('after', `
Each line is ok, warn or fail, with what to do. Nothing is changed and no secret is printed. Exit 0 when
nothing fails (warnings allowed), 1 otherwise. With --listen (or SYNCAUTH_LISTEN) it asks that daemon's /readyz.

Examples:
  syncauth doctor
  syncauth doctor --profile docs --json
  syncauth doctor --listen 127.0.0.1:9464`)
      .action(lazy(() => import('./commands/doctor.js'), 'doctor'));
  }

  if (declared('completion')) {
    program.command('completion')
      .description('print a shell completion script for bash, zsh or fish')
      .addArgument(program.createArgument('<shell>', 'the shell').choices(['bash', 'zsh', 'fish']))
      .addHelpText('after', `
Install:
  bash:  echo 'source <(syncauth completion bash)' >> ~/.bashrc
  zsh:   echo 'source <(syncauth completion zsh)' >> ~/.zshrc     # after compinit runs there
  fish:  syncauth completion fish > ~/.config/fish/completions/syncauth.fish`)
      // Not lazy(): it needs the command tree, and neither settings nor .env.
      .action(async (shell: string, _options: unknown, command: Command) => {
        const { completion } = await import('./commands/completion.js');
        completion(command.parent as Command, shell, factory.io);
      });
  }


  return program;
}

/**
 * The top-level command a command line runs when it names one first (`syncauth source list`), so that only it
 * is declared; undefined for anything else (root options first, `help`, a typo, `completion`, which describes
 * the whole tree), which declares every command.
 */
export function commandRun(argv: string[]): CommandName | undefined {
  const first = argv[2];
  return first !== 'completion' && (COMMAND_NAMES as readonly string[]).includes(first ?? '') ? (first as CommandName) : undefined;
}

/** Runs one command line (`argv` as process.argv has it) with the parts `factory` builds; resolves with the exit code. */
export async function main(argv: string[], factory: Factory): Promise<number> {
  const io = factory.io;
  const secretFlag = refusedSecretFlag(argv.slice(2));
  if (secretFlag) {
    io.stderr.write(
      `error: ${secretFlag} is refused: secrets are never taken from flags, where every user can read them (ps, shell history).\n` +
        `hint: set ${SECRET_FLAGS[secretFlag]} in the environment or a .env file instead; if a real secret was typed, rotate it.\n`,
    );
    return ExitCode.usage;
  }
  const program = buildProgram(factory, commandRun(argv));
  try {
    await program.parseAsync(argv);
    return interruptedExitCode() ?? ExitCode.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      return error.exitCode === 0 ? ExitCode.ok : ExitCode.usage;
    }
    const interrupted = interruptedExitCode();
    if (interrupted === undefined) return reportError(io, error);
    // After Ctrl-C the failures it caused (a cancelled wait or request) go unsaid; what the command says it
    // left behind is printed.
    if (error instanceof InterruptedError && error !== interruptSignal.reason) reportError(io, error);
    return interrupted;
  }
}
