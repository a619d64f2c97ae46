// Re-authorization links: `PUBLIC_URL/reauthorize/<token>`, where the token is 256 random bits (base64url). The
// token is the only credential of the page, so only its SHA-256 is kept, with the profile it is bound to, its
// expiry and whether it may change the Dropbox account; a lookup compares digests in constant time. Opening the
// page spends nothing (mail and chat scanners fetch links); every link of the profile is spent when a new grant
// is stored, and no link is dropped otherwise before it expires: minting never drops another (a link sent in a
// notice keeps working whatever `syncauth reauth-link` mints), so a profile's live links are capped instead.
// Storage sits behind `LinkStore`: here a small versioned file in the config dir (0600, atomic
// writes, a lock across processes, so `syncauth reauth-link` and the daemon share it); a store shared by
// replicas can take its place.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import path from 'node:path';
import * as z from 'zod';
import { ensurePrivateDir, readTextIfExists, writePrivateFile } from '../profile/files.js';
import { withFileLock } from '../profile/lock.js';
import { PROFILE_NAME_PATTERN } from '../profile/name.js';
import { SyncauthError } from '../errors.js';

/** 72 hours: long enough for a weekend, short enough that a forgotten link dies. */
export const DEFAULT_LINK_TTL_MS = 72 * 3_600_000;
/**
 * Live links a profile may hold at once: room for the three asks of a notice (each carries its own) and a few
 * minted by hand. Past it a mint is refused (REAUTH_LINKS_FULL); no live link is ever dropped to make room.
 */
export const LINKS_PER_PROFILE = 10;
/** A token as it appears in a link: 32 bytes, base64url without padding. */
export const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

export interface LinkRecord {
  /** SHA-256 of the token, base64url. */
  hash: string;
  profile: string;
  /** Epoch ms. */
  expiresAt: number;
  createdAt: number;
  allowAccountChange: boolean;
}

/** A completion's hold on its profile, from LinkStore.claim. */
export interface LinkClaim {
  /**
   * Whether the claim is still this completion's, its lease extended by another `leaseMs` when it is: asked right
   * before the grant is stored, which happens only while the claim is held.
   */
  renew(): Promise<boolean>;
}

/** What LinkStore.claim came to: the completion's own result, or another completion holding the profile. */
export type Claimed<T> = { claimed: true; value: T } | { claimed: false };

/** Where link digests live. Every method is safe to call from several processes at once. */
export interface LinkStore {
  /**
   * Keeps a new link, dropping expired ones; throws REAUTH_LINKS_FULL, keeping nothing, when its profile holds
   * LINKS_PER_PROFILE live links already.
   */
  add(record: LinkRecord): Promise<void>;
  /** The unexpired link whose digest is `hash`, compared in constant time, or undefined. */
  find(hash: string, now: number): Promise<LinkRecord | undefined>;
  /** Spends every link of the profile (the new grant is stored). Returns how many there were. */
  spend(profile: string): Promise<number>;
  /** The unexpired links of a profile, without their digests' use to anyone: for `status`. */
  outstanding(profile: string, now: number): Promise<{ expiresAt: number; allowAccountChange: boolean }[]>;
  /**
   * Runs `complete` as the one completion of a re-authorization of `profile` under way, wherever the links are
   * stored (every process and replica that shares them): `{ claimed: false }` at once, without running it, while
   * another holds the claim. The claim is released when `complete` settles; one whose holder died lapses (after
   * `leaseMs` in Redis; the file store's lock is taken over from a dead process). The caller looks its link up
   * again once it holds the claim: a completion that finished meanwhile spent it.
   */
  claim<T>(profile: string, leaseMs: number, complete: (claim: LinkClaim) => Promise<T>): Promise<Claimed<T>>;
}

/** A mint refused: the profile holds as many live links as it may. */
export function linksFullError(profile: string, expiries: number[]): SyncauthError {
  const first = expiries.length > 0 ? new Date(Math.min(...expiries)).toISOString() : undefined;
  return new SyncauthError(
    'REAUTH_LINKS_FULL',
    `profile "${profile}" already has ${expiries.length} live re-authorization links, as many as it may; each works until it expires${first ? ` (the first at ${first})` : ''} or the profile is re-authorized, so send one of those (a notice's link is in the notice) rather than a new one`,
    { kind: 'configuration' },
  );
}

/** Thrown by a claim's lock when another process holds it: the claim is not this caller's. */
class ClaimHeld extends Error {}

export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('base64url');
}

function sameDigest(a: string, b: string): boolean {
  const x = Buffer.from(a, 'base64url');
  const y = Buffer.from(b, 'base64url');
  return x.length === 32 && y.length === 32 && timingSafeEqual(x, y);
}

const LINKS_VERSION = 1;
const LinksFileSchema = z.strictObject({
  version: z.literal(LINKS_VERSION),
  links: z.array(
    z.strictObject({
      hash: z.string().regex(TOKEN_PATTERN),
      profile: z.string().min(1),
      expiresAt: z.number().int().positive(),
      createdAt: z.number().int().positive(),
      allowAccountChange: z.boolean(),
    }),
  ),
});

export const LINKS_FILE_NAME = 'reauth-links.json';

/** The links in `<configDir>/reauth-links.json`. */
export function fileLinkStore(configDir: string): LinkStore {
  const file = path.join(configDir, LINKS_FILE_NAME);
  const lockPath = `${file}.lock`;

  async function read(): Promise<LinkRecord[]> {
    const text = await readTextIfExists(file);
    if (text === undefined) return [];
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch {
      data = undefined;
    }
    const parsed = LinksFileSchema.safeParse(data);
    if (!parsed.success) {
      throw new SyncauthError('REAUTH_LINKS_CORRUPT', `the re-authorization links file ${file} is not valid; delete it (every outstanding link stops working) and mint a new link`, {
        kind: 'configuration',
      });
    }
    return parsed.data.links;
  }

  async function change(mutate: (links: LinkRecord[]) => LinkRecord[]): Promise<void> {
    await ensurePrivateDir(configDir);
    await withFileLock(lockPath, async () => {
      const next = mutate(await read());
      await writePrivateFile(file, `${JSON.stringify({ version: LINKS_VERSION, links: next }, null, 2)}\n`, undefined, { followLinks: false });
    }, {
      waitMs: 15_000,
      staleMs: 10_000,
      recordOwner: true,
      timeoutError: () => new SyncauthError('REAUTH_LINKS_LOCKED', `could not lock ${file} within 15 s: another syncauth process holds ${lockPath}`),
    });
  }

  return {
    async claim(profile, _leaseMs, complete) {
      // One lock per profile beside the links file; a name that could not be a profile's is never claimed.
      if (!PROFILE_NAME_PATTERN.test(profile)) return { claimed: false };
      try {
        const value = await withFileLock(path.join(configDir, `reauth-claim.${profile}.lock`), (signal) => complete({ renew: async () => !signal.aborted }), {
          // Tried once: a second callback is told the first is under way, it does not queue behind it.
          waitMs: 0,
          staleMs: 10_000,
          recordOwner: true,
          timeoutError: () => new ClaimHeld(),
        });
        return { claimed: true, value };
      } catch (error) {
        if (error instanceof ClaimHeld) return { claimed: false };
        throw error;
      }
    },
    add: (record) =>
      change((links) => {
        const live = links.filter((link) => link.expiresAt > record.createdAt);
        const same = live.filter((link) => link.profile === record.profile);
        if (same.length >= LINKS_PER_PROFILE) throw linksFullError(record.profile, same.map((link) => link.expiresAt));
        return [...live, record];
      }),
    async find(hash, now) {
      let found: LinkRecord | undefined;
      // Every digest is compared, the match or not, so the time taken says nothing about which one matched.
      for (const link of await read()) if (sameDigest(link.hash, hash) && link.expiresAt > now) found = link;
      return found;
    },
    async spend(profile) {
      let spent = 0;
      await change((links) => {
        const kept = links.filter((link) => link.profile !== profile);
        spent = links.length - kept.length;
        return kept;
      });
      return spent;
    },
    async outstanding(profile, now) {
      return (await read())
        .filter((link) => link.profile === profile && link.expiresAt > now)
        .map((link) => ({ expiresAt: link.expiresAt, allowAccountChange: link.allowAccountChange }));
    },
  };
}

export interface MintOptions {
  profile: string;
  /** The page's public base URL, e.g. https://syncauth.example.com (no trailing slash needed). */
  publicUrl: string;
  ttlMs?: number;
  allowAccountChange?: boolean;
  now?: () => number;
}

/** Mints a link: its digest stored, the link itself returned (and nowhere kept). */
export async function mintLink(store: LinkStore, options: MintOptions): Promise<{ url: string; expiresAt: number }> {
  const now = (options.now ?? Date.now)();
  const token = randomBytes(32).toString('base64url');
  const expiresAt = now + (options.ttlMs ?? DEFAULT_LINK_TTL_MS);
  await store.add({ hash: hashToken(token), profile: options.profile, expiresAt, createdAt: now, allowAccountChange: options.allowAccountChange === true });
  return { url: `${options.publicUrl.replace(/\/+$/, '')}/reauthorize/${token}`, expiresAt };
}

/**
 * What the daemon hands the notifier: a fresh link for a profile, each call a new one (every ask carries its
 * own), bound to the page's public URL and TTL.
 */
export function linkMinter(store: LinkStore, options: { publicUrl: string; ttlMs?: number; now?: () => number }): { linkFor(profile: string, allowAccountChange?: boolean): Promise<{ url: string; expiresAt: number }> } {
  return {
    linkFor: (profile, allowAccountChange) => mintLink(store, { ...options, profile, allowAccountChange: allowAccountChange === true }),
  };
}
