// Publishing the access token for processes next to the daemon: written whole or not at all (a temporary
// file renamed over the old one), readable by the owner only, and removed once the token it holds expires.
// Beside it, `<file>.expires_at` holds the token's expiry (RFC 3339), so a consumer can judge the token when no
// daemon runs. The token is written before its expiry and removed before it, so a consumer that reads both
// never sees a token with a later expiry than its own.
import { rm } from 'node:fs/promises';
import { ValidationError } from '../errors.js';
import type { Logger } from '../log.js';
import { readTextIfExists, removeTemporaryLeftovers, writePrivateFile } from '../profile/files.js';

export const EXPIRY_SUFFIX = '.expires_at';

export const PROFILE_PLACEHOLDER = '{profile}';

export function tokenFileFor(template: string, profile: string): string {
  return template.split(PROFILE_PLACEHOLDER).join(profile);
}

/** Several profiles cannot share one file: the path must tell them apart. */
export function checkTokenFileTemplate(template: string, profileCount: number, field = 'tokenFile'): void {
  if (profileCount > 1 && !template.includes(PROFILE_PLACEHOLDER)) {
    throw new ValidationError([
      {
        field,
        message: `serves ${profileCount} profiles, so the path must contain ${PROFILE_PLACEHOLDER} (e.g. /run/syncauth/${PROFILE_PLACEHOLDER}.token)`,
      },
    ]);
  }
}

/** The token alone, no newline: `$(cat file)` and a program reading the whole file both get it exactly. */
export async function writeTokenFile(file: string, token: string, expiresAt: number): Promise<void> {
  await writePrivateFile(file, token);
  await writePrivateFile(`${file}${EXPIRY_SUFFIX}`, `${new Date(expiresAt).toISOString()}\n`);
}

export async function removeTokenFile(file: string): Promise<void> {
  await rm(file, { force: true });
  await rm(`${file}${EXPIRY_SUFFIX}`, { force: true });
}

/** What a token file left by an earlier run holds, when both it and its expiry can be read. */
export async function readTokenFile(file: string): Promise<{ value: string; expiresAt: number } | undefined> {
  const [value, expiry] = await Promise.all([readTextIfExists(file), readTextIfExists(`${file}${EXPIRY_SUFFIX}`)]);
  const expiresAt = expiry === undefined ? NaN : Date.parse(expiry.trim());
  if (!value || !Number.isFinite(expiresAt)) return undefined;
  return { value, expiresAt };
}

/** Removes what an interrupted write left beside the token file and its expiry: this process is their only writer. */
export function removeLeftovers(file: string): Promise<void> {
  return removeTemporaryLeftovers([file, `${file}${EXPIRY_SUFFIX}`], 0);
}

/** The holder side of a profile, as far as publishing goes. */
interface Holder {
  readonly name: string;
  readonly token: { value: string; expiresAt: number } | undefined;
  readonly removed: boolean;
  /** Whether the token held is unexpired at `at`, by every clock the holder trusts. */
  holdsToken(at: number): boolean;
  /** Writes and removals of the profile's file, one after another. */
  fileChain: Promise<void>;
  /** What the file holds once a write or removal has finished; readiness waits for it. */
  publishedToken: string | undefined;
}

/** Writes and removes each profile's token file, in order per profile; failures are logged, never thrown. */
export class TokenPublisher {
  constructor(
    private readonly template: string | undefined,
    private readonly now: () => number,
    private readonly log: Logger,
  ) {}

  publish(holder: Holder): Promise<void> {
    const token = holder.token;
    return this.#queue(holder, async (path) => {
      // Checked again when the write's turn comes: a token that expired or was replaced meanwhile is not written.
      if (!token || holder.token !== token || holder.removed || !holder.holdsToken(this.now())) return;
      await writeTokenFile(path, token.value, token.expiresAt);
      holder.publishedToken = token.value;
    });
  }

  /** Where the profile's token is published; undefined when nothing is. */
  pathOf(name: string): string | undefined {
    return this.template === undefined ? undefined : tokenFileFor(this.template, name);
  }

  unpublish(holder: Holder): Promise<void> {
    return this.#queue(holder, async (path) => {
      holder.publishedToken = undefined;
      await removeTokenFile(path);
    });
  }

  #queue(holder: Holder, op: (path: string) => Promise<void>): Promise<void> {
    const path = this.pathOf(holder.name);
    if (path === undefined) return Promise.resolve();
    holder.fileChain = holder.fileChain.then(() =>
      op(path).catch((error: unknown) => {
        const code = (error as NodeJS.ErrnoException).code;
        this.log.error({ profile: holder.name, event: 'token_file.failed', op: 'publish', errorCode: code, error: (error as Error).message, path }, 'could not update the token file');
      }),
    );
    return holder.fileChain;
  }
}
