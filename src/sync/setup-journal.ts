// Setup's record of a write in progress, so that a setup killed without warning (`kill -9`, a power cut) between
// storing the grant and recording the profile is finished or undone by the next command, and never leaves
// secrets without a profile.
//
// The secrets (keychain or encrypted file) and the profile's state (a JSON file) are two stores, written one after
// the other. Before the first write, setup leaves `<profiles>/<name>.setup-pending`: the state to record once the
// secrets are in (non-secret, like the state itself) and the expiry of the grant's first access token. The same
// `set()` that stores the secrets stores that access token last, bound to the grant (see sync/token-cache.ts), so
// finding it proves that every secret of the new grant landed. Then the state is written and the record removed.
// The old state file is not touched until the secrets are in, so undoing needs no copy of it.
//
// The next command that opens the profile (or `status`) finds a record whose setup is no longer running (its lock
// is free, or its holder is dead) and:
// - finds the new access token: the grant is in hand; records the state, which says setup is unfinished until
//   `syncauth refresh` makes the connector;
// - does not: nothing usable was stored; for a new profile it removes whatever part of the secrets got written,
//   and a re-run's profile is left as it was.
import { rm } from 'node:fs/promises';
import path from 'node:path';
import * as z from 'zod';
import type { SecretStore } from '../credentials/index.js';
import { ExitCode, SyncauthError } from '../errors.js';
import { readdirIfExists, readTextIfExists, writePrivateFile, ensurePrivateDir } from '../profile/files.js';
import { withFileLock } from '../profile/lock.js';
import { assertProfileName, syncauthCommand } from '../profile/name.js';
import { ProfileStateSchema, type ProfileStateDraft, type ProfileStore } from '../profile/index.js';
import { decodeAccessToken } from './token-cache.js';

const JOURNAL_VERSION = 1;

const JournalSchema = z.strictObject({
  version: z.literal(JOURNAL_VERSION),
  profile: z.string(),
  startedAt: z.iso.datetime({ offset: true }),
  /** Epoch milliseconds: the expiry of the access token stored last with the new secrets. */
  accessTokenExpiresAt: z.number().int().positive(),
  /** Whether the profile had a state before this setup; a new profile's partial secrets are removed on undo. */
  hadState: z.boolean(),
  /** The state to record once the secrets are in. */
  state: ProfileStateSchema.partial(),
});
type Journal = z.infer<typeof JournalSchema>;

function journalFile(profiles: ProfileStore, name: string): string {
  assertProfileName(name);
  return path.join(profiles.dir, `${name}.setup-pending`);
}

/**
 * Holds the profile's setup lock while `fn` runs: the setup writing, or a command recovering. A holder that died
 * (kill -9) is found by its owner record and its lock taken at once.
 */
export function withSetupLock<T>(profiles: ProfileStore, name: string, fn: () => Promise<T>): Promise<T> {
  const lockPath = path.join(profiles.dir, `${name}.setup.lock`);
  return (async () => {
    await ensurePrivateDir(profiles.dir);
    return withFileLock(lockPath, fn, {
      waitMs: 15_000,
      staleMs: 10_000,
      recordOwner: true,
      timeoutError: () =>
        new SyncauthError('SYNCAUTH_SETUP_BUSY', `profile "${name}" is being set up by another syncauth process (${lockPath})`, {
          exitCode: ExitCode.error,
          hint: 'wait for that setup to end, then try again',
        }),
    });
  })();
}

/** Leaves the record before the first write of a setup. */
export async function writeJournal(
  profiles: ProfileStore,
  name: string,
  entry: { accessTokenExpiresAt: number; hadState: boolean; state: ProfileStateDraft },
): Promise<void> {
  const journal: Journal = {
    version: JOURNAL_VERSION,
    profile: name,
    startedAt: new Date().toISOString(),
    accessTokenExpiresAt: entry.accessTokenExpiresAt,
    hadState: entry.hadState,
    state: entry.state as Journal['state'],
  };
  await ensurePrivateDir(profiles.dir);
  await writePrivateFile(journalFile(profiles, name), `${JSON.stringify(journal, null, 2)}\n`);
}

export async function clearJournal(profiles: ProfileStore, name: string): Promise<void> {
  await rm(journalFile(profiles, name), { force: true });
}

export type Recovery = 'none' | 'finished' | 'undone';

/**
 * Finishes or undoes a setup that was killed between its writes, when there is one and it is no longer running.
 * Cheap when there is none: one read of a file that does not exist.
 */
export async function recoverInterruptedSetup(
  profiles: ProfileStore,
  secrets: SecretStore,
  name: string,
  say: (line: string) => void,
): Promise<Recovery> {
  const file = journalFile(profiles, name);
  if ((await readTextIfExists(file)) === undefined) return 'none';
  return withSetupLock(profiles, name, async () => {
    // Read again under the lock: the setup that wrote it may have finished while this process waited.
    const text = await readTextIfExists(file);
    if (text === undefined) return 'none';
    let journal: Journal | undefined;
    try {
      const parsed = JournalSchema.safeParse(JSON.parse(text));
      if (parsed.success && parsed.data.profile === name) journal = parsed.data;
    } catch {
      journal = undefined;
    }
    if (!journal) {
      // Written whole or not at all (an atomic write), so this is not ours to interpret: set it aside.
      await rm(file, { force: true });
      say(`profile "${name}": removed an unreadable record of an interrupted setup (${file}); run \`${syncauthCommand('status')}\` to see the profile`);
      return 'none';
    }
    const stored = await secrets.get(name);
    const landed = stored.app_key && stored.refresh_token
      ? decodeAccessToken(stored.access_token, { appKey: stored.app_key, refreshToken: stored.refresh_token })
      : undefined;
    if (landed && landed.expiresAt === journal.accessTokenExpiresAt) {
      const state = journal.state as ProfileStateDraft;
      await profiles.update(name, () => state, { resetCorrupt: true });
      await rm(file, { force: true });
      say(`profile "${name}": a setup stopped after storing the new grant; the profile is kept as unfinished: run \`${syncauthCommand(`refresh --profile ${name}`)}\` to finish it`);
      return 'finished';
    }
    if (!journal.hadState) {
      // A new profile: whatever part of its secrets got written is removed, with any state a crash left.
      await secrets.delete(name);
      await profiles.delete(name);
    }
    await rm(file, { force: true });
    say(`profile "${name}": a setup stopped before its grant was stored; it was undone${journal.hadState ? ' and the profile is as it was before' : ' and nothing of it is kept'}`);
    return 'undone';
  });
}

/** Names of profiles with a record of an interrupted setup, for `status`, which lists profiles without opening each. */
export async function pendingSetups(profiles: ProfileStore): Promise<string[]> {
  return (await readdirIfExists(profiles.dir)).filter((f) => f.endsWith('.setup-pending')).map((f) => f.slice(0, -'.setup-pending'.length)).sort();
}
