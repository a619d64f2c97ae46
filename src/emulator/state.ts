// The emulator's mutable world, and the generators of the ids, codes and tokens it hands out.
import type {
  DropboxAccount,
  EmulatorState,
  Grant,
  IssuedAccessToken,
  IssuedCode,
  RequestLogEntry,
  ResolvedEmulatorOptions,
  SeededIds,
  StoredWorkflow,
  WorkspaceState,
} from './types.js';

/** The live state; `EmulatorState` is the read-only face of the same object. */
export interface MutableState extends EmulatorState {
  readonly workspaces: Map<string, WorkspaceState>;
  readonly seeded: Map<string, SeededIds>;
  readonly apiKeys: Map<string, WorkspaceState>;
  readonly codes: Map<string, IssuedCode>;
  readonly grants: Map<string, Grant>;
  readonly grantsByRefreshToken: Map<string, Grant>;
  readonly accessTokens: Map<string, IssuedAccessToken>;
  readonly requests: RequestLogEntry[];
}

export class Generator {
  constructor(private readonly random: (size: number) => Buffer) {}

  /** Version 4 uuid, lower case, as the service renders ids. */
  uuid(): string {
    const b = Buffer.from(this.random(16));
    b[6] = ((b[6] ?? 0) & 0x0f) | 0x40;
    b[8] = ((b[8] ?? 0) & 0x3f) | 0x80;
    const h = b.toString('hex');
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
  }

  /** URL-safe random text of exactly `length` characters. */
  text(length: number): string {
    return this.random(Math.ceil((length * 3) / 4) + 3).toString('base64url').slice(0, length);
  }

  /** Uniform number in [0, 1). */
  fraction(): number {
    return this.random(4).readUInt32BE(0) / 2 ** 32;
  }

  digits(length: number): string {
    let out = '';
    for (const byte of this.random(length)) out += String(byte % 10);
    return out.replace(/^0/, '1');
  }

  // Shapes follow real samples (dropbox-oauth.md §1.4, §2.4): codes ~43 characters, refresh tokens ~64
  // with a run of A's, access tokens `sl.u.` plus ~1.3k characters. A realistic length catches storage
  // that truncates tokens (TandoorRecipes/recipes#3103 rejected a 1330-character token).
  authorizationCode(): string {
    return `${this.text(11)}AAAAAAAAA${this.text(23)}`;
  }

  refreshToken(): string {
    return `${this.text(11)}AAAAAAAAAA${this.text(43)}`;
  }

  accessToken(): string {
    return `sl.u.${this.text(1320)}`;
  }

  nonce(): string {
    return this.text(32);
  }
}

export function createState(options: ResolvedEmulatorOptions, gen: Generator): MutableState {
  const workspaces = new Map<string, WorkspaceState>();
  const apiKeys = new Map<string, WorkspaceState>();
  const seeded = new Map<string, SeededIds>();
  const createdAt = new Date(options.now()).toISOString();
  for (const ws of options.workspaces) {
    if (workspaces.has(ws.name)) throw new Error(`emulator: workspace "${ws.name}" is defined twice`);
    const state: WorkspaceState = {
      name: ws.name,
      apiKeys: [...ws.apiKeys],
      sources: new Map(),
      workflows: new Map(),
      destinations: new Map(),
      jobs: new Map(),
      checks: new Map(),
    };
    for (const key of ws.apiKeys) {
      if (apiKeys.has(key)) throw new Error(`emulator: an API key is listed for two workspaces (${ws.name})`);
      apiKeys.set(key, state);
    }
    workspaces.set(ws.name, state);
    if (options.seed) {
      const destinationId = gen.uuid();
      state.destinations.set(destinationId, {
        id: destinationId,
        name: `${ws.name} destination`,
        type: 's3',
        config: { remote_url: `s3://emulator-${ws.name}/output`, anonymous: false },
        created_at: createdAt,
        updated_at: null,
      });
      const workflow: StoredWorkflow = {
        id: gen.uuid(),
        name: `${ws.name} workflow`,
        sources: [],
        destinations: [destinationId],
        workflow_type: 'custom',
        workflow_nodes: [],
        schedule: null,
        status: 'inactive',
        created_at: createdAt,
        updated_at: null,
        reprocess_all: false,
      };
      state.workflows.set(workflow.id, workflow);
      seeded.set(ws.name, { workflowId: workflow.id, destinationId });
    }
  }
  const appKeys = new Set<string>();
  for (const app of options.apps) {
    if (appKeys.has(app.appKey)) throw new Error(`emulator: app key ${app.appKey} is defined twice`);
    appKeys.add(app.appKey);
  }
  const account: DropboxAccount = {
    accountId: `dbid:AA${gen.text(33)}`,
    uid: gen.digits(10),
    email: 'emulated.user@example.com',
    displayName: 'Emulated User',
  };
  const other: DropboxAccount = {
    accountId: `dbid:AA${gen.text(33)}`,
    uid: gen.digits(10),
    email: 'other.user@example.com',
    displayName: 'Other User',
  };
  return {
    workspaces,
    seeded,
    apiKeys,
    account,
    accounts: [account, other],
    codes: new Map(),
    grants: new Map(),
    grantsByRefreshToken: new Map(),
    accessTokens: new Map(),
    requests: [],
  };
}
