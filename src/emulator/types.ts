// Public shapes of the emulator: its options, its inspectable state, and the running handle.
import type { InProcessDispatcher } from './in-process.js';

/** A Dropbox app as registered in the App Console. */
export interface EmulatorApp {
  appKey: string;
  appSecret: string;
  name: string;
  /** The app folder's name: the user sees it as `Apps/<folderName>`. */
  folderName: string;
  redirectUris: string[];
  /** The scopes ticked on the app's Permissions tab; an authorize request may ask for a subset. */
  scopes: string[];
  /** Subfolder path inside the app folder (`'/data'`, `'/data/2024'`) -> names of the files in it. */
  folders?: Record<string, string[]>;
}

/** A workspace of the ingestion service; each API key belongs to exactly one. */
export interface EmulatorWorkspace {
  name: string;
  apiKeys: string[];
}

export type FaultRoute =
  | 'authorize'
  | 'token'
  | 'revoke'
  | 'account'
  | 'list_folder'
  | 'sources'
  | 'workflows'
  | 'destinations'
  | 'jobs'
  | '*';

/** Where a request went; `other` is anything outside the emulated routes. */
export type EmulatorRoute = Exclude<FaultRoute, '*'> | 'other';

export interface FaultRule {
  route: FaultRoute;
  /** Answer with this status instead of handling the request (500, 429, 503, ...). */
  status?: number;
  /** Sent as `Retry-After`; 429 answers carry 1 when this is not given. */
  retryAfterSeconds?: number;
  /** Share of matching requests the rule fires on, 0..1; default 1. */
  errorRate?: number;
  /** Delay before the request is answered (or before the fault status is sent). */
  latencyMs?: number;
  /** The rule applies to the next N matching requests only, then lies dormant. */
  times?: number;
  /**
   * A trickling answer: the request is handled as usual, but its status and headers go out at once and the body
   * follows a byte at a time, spread over this many milliseconds (a slow or congested link).
   */
  trickleMs?: number;
}

export interface EmulatorOptions {
  /** 0 (the default) picks an ephemeral port. */
  port?: number;
  /** Header carrying the service API key; default `service-api-key`. */
  apiKeyHeader?: string;
  workspaces?: EmulatorWorkspace[];
  apps?: EmulatorApp[];
  /** Lifetime of access tokens; default 14400 (Dropbox's 4 hours). Fractions are taken, for quick tests. */
  tokenLifetimeSeconds?: number;
  /** Lifetime of authorization codes; default 300 (Dropbox's real value is undocumented). */
  codeLifetimeSeconds?: number;
  /** The authorize page acts at once as if Allow was clicked (for the demo and headless tests). */
  autoApprove?: boolean;
  faults?: FaultRule[];
  /** Default true: each workspace starts with one destination and one workflow wired to it. */
  seed?: boolean;
  /** How long a connection check stays SCHEDULED before it reports; default 200 ms. */
  checkDelayMs?: number;
  /** How long a job stays in each of SCHEDULED and IN_PROGRESS before it finishes; default 500 ms. */
  jobStepMs?: number;
  /**
   * Default true: a second connector of a name already in the workspace is refused with 409. False accepts it,
   * as a deployment without that rule may (the public material does not promise one), so that clients are tried
   * against workspaces holding several connectors of one name.
   */
  uniqueConnectorNames?: boolean;
  /** Clock in milliseconds since the epoch; default `Date.now`. */
  now?: () => number;
  /** Source of random bytes for ids, codes, tokens and fault rolls; default `crypto.randomBytes`. */
  random?: (size: number) => Buffer;
}

export interface ResolvedEmulatorOptions {
  port: number;
  apiKeyHeader: string;
  workspaces: EmulatorWorkspace[];
  apps: EmulatorApp[];
  tokenLifetimeSeconds: number;
  codeLifetimeSeconds: number;
  autoApprove: boolean;
  faults: FaultRule[];
  seed: boolean;
  checkDelayMs: number;
  jobStepMs: number;
  uniqueConnectorNames: boolean;
  now: () => number;
  random: (size: number) => Buffer;
}

/** A source or destination connector as the service stores it; the two have the same shape. */
export interface StoredConnector {
  id: string;
  name: string;
  type: string;
  config: Record<string, unknown>;
  created_at: string;
  updated_at: string | null;
}

export type StoredSource = StoredConnector;

export type StoredDestination = StoredConnector;

/** A connection check as the service reports it (DagNodeConnectionCheck), and when it reports. */
export interface StoredCheck {
  id: string;
  status: 'SCHEDULED' | 'SUCCESS' | 'FAILURE';
  reason: string | null;
  created_at: string;
  reported_at: string | null;
  /** Internal: the source checked and when (emulator clock, ms) the result is known. */
  readonly sourceId: string;
  readonly dueAt: number;
}

export type JobStatus = 'SCHEDULED' | 'IN_PROGRESS' | 'COMPLETED' | 'STOPPED' | 'FAILED';

export interface StoredJob {
  id: string;
  workflow_id: string;
  workflow_name: string;
  status: JobStatus;
  created_at: string;
  runtime: string | null;
  input_file_ids: string[] | null;
  output_node_files: { node_id: string; file_id: string }[] | null;
  job_type: 'ephemeral' | 'persistent' | 'scheduled';
  /** Internal: when (emulator clock, ms) it started, and why it failed. */
  readonly startedAt: number;
  failure: string | null;
}

export interface StoredWorkflowNode {
  id: string;
  name: string;
  type: string;
  subtype: string;
  settings: Record<string, unknown> | null;
}

export interface StoredWorkflow {
  id: string;
  name: string;
  sources: string[];
  destinations: string[];
  workflow_type: string | null;
  workflow_nodes: StoredWorkflowNode[];
  schedule: { crontab_entries: { cron_expression: string }[] } | null;
  status: 'active' | 'inactive';
  created_at: string;
  updated_at: string | null;
  reprocess_all: boolean | null;
}

export interface WorkspaceState {
  readonly name: string;
  readonly apiKeys: readonly string[];
  readonly sources: Map<string, StoredSource>;
  readonly workflows: Map<string, StoredWorkflow>;
  readonly destinations: Map<string, StoredDestination>;
  readonly jobs: Map<string, StoredJob>;
  /** The latest connection check of each source, by source id. */
  readonly checks: Map<string, StoredCheck>;
}

export interface SeededIds {
  workflowId: string;
  destinationId: string;
}

/** An authorization code handed out by the authorize page. */
export interface IssuedCode {
  readonly code: string;
  readonly appKey: string;
  readonly redirectUri: string | null;
  readonly scopes: readonly string[];
  readonly tokenAccessType: 'offline' | 'online';
  readonly codeChallenge: string | null;
  /** The account the user approved as. */
  readonly accountId: string;
  readonly issuedAt: number;
  readonly expiresAt: number;
  used: boolean;
}

/** What one approval (one code exchange) grants: a refresh token when offline, and its access tokens. */
export interface Grant {
  readonly id: string;
  readonly appKey: string;
  readonly accountId: string;
  readonly scopes: readonly string[];
  readonly refreshToken: string | null;
  /** Obtained with PKCE and no secret: may be refreshed with the client_id alone. */
  readonly publicClient: boolean;
  readonly createdAt: number;
  revokedAt: number | null;
}

export interface IssuedAccessToken {
  readonly token: string;
  readonly grantId: string;
  readonly scopes: readonly string[];
  readonly issuedAt: number;
  readonly expiresAt: number;
}

export interface RequestLogEntry {
  route: EmulatorRoute;
  method: string;
  /** The path alone: query strings may carry secrets (the Dropbox JS SDK sends them there). */
  path: string;
  status: number;
  at: number;
  /** The grant a token request named by its refresh token (known or revoked), when it named one. */
  grantId?: string;
  /** The size of the answer's body in bytes, as its Content-Length said (absent when it sent none). */
  bytes?: number;
}

export interface DropboxAccount {
  readonly accountId: string;
  readonly uid: string;
  readonly email: string;
  readonly displayName: string;
}

export interface EmulatorState {
  readonly workspaces: ReadonlyMap<string, WorkspaceState>;
  /** Seeded ids per workspace name (empty with `seed: false`). */
  readonly seeded: ReadonlyMap<string, SeededIds>;
  /** The account signed in on the authorize page by default (the first of `accounts`). */
  readonly account: DropboxAccount;
  /**
   * Every account the authorize page can approve as: the default one, and a second one, as a person signed in
   * to two Dropbox accounts would switch between them (the page's account choice).
   */
  readonly accounts: readonly DropboxAccount[];
  readonly codes: ReadonlyMap<string, IssuedCode>;
  /** Grants by id. */
  readonly grants: ReadonlyMap<string, Grant>;
  readonly accessTokens: ReadonlyMap<string, IssuedAccessToken>;
  readonly requests: readonly RequestLogEntry[];
}

export interface RunningEmulator {
  /** `http://127.0.0.1:PORT`, also the service's base URL (its paths start with `/api/v1/`). */
  url: string;
  /** The service base URL, the same as `url`; named for the reader. */
  serviceUrl: string;
  /** Dropbox's authorize page (`https://www.dropbox.com/oauth2/authorize` in real life). */
  authorizeUrl: string;
  /** Dropbox's token endpoint (`https://api.dropboxapi.com/oauth2/token`). */
  tokenUrl: string;
  /** Dropbox's v2 API base (`https://api.dropboxapi.com`): `/2/...` routes hang off it. */
  apiUrl: string;
  options: ResolvedEmulatorOptions;
  state: EmulatorState;
  /** Seeded ids of the first workspace, or null with `seed: false`. */
  seeded: SeededIds | null;
  setFaults(rules: FaultRule[]): void;
  /**
   * A dispatcher (the `dispatcher` Dropbox calls take) that answers the v2 API routes within this process, logged
   * in `state.requests` as the server logs them, and sends every other call (and an API call a fault rule names)
   * over HTTP.
   */
  readonly dispatcher: InProcessDispatcher;
  /** Simulates the user unlinking the app: the grant's refresh token and all its access tokens die. */
  revokeGrant(refreshToken: string): void;
  close(): Promise<void>;
}
