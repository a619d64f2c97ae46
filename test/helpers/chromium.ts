// The real headless Chromium the browser tests drive (DESIGN.md, "Tests and CI"): Debian's `chromium` package,
// launched by playwright-core, which never downloads a browser of its own. In CI a missing Chromium fails the
// tests; elsewhere they are skipped, saying why.
import { accessSync, constants } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';

export const DEFAULT_CHROMIUM = '/usr/bin/chromium';

/**
 * The flags of DESIGN.md. Playwright adds its own (among them a new, empty `--user-data-dir` in a temporary
 * directory it removes on close; it refuses one in `args`).
 */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
];

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** `/usr/bin/chromium`, else `chromium` on PATH, else null. */
export function findChromium(env: NodeJS.ProcessEnv = process.env, preferred = DEFAULT_CHROMIUM): string | null {
  if (isExecutable(preferred)) return preferred;
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, 'chromium');
    if (isExecutable(candidate)) return candidate;
  }
  return null;
}

export interface ChromiumAvailability {
  /** The executable, or null when there is none. */
  executablePath: string | null;
  /** True outside CI when Chromium is missing: the caller skips its browser tests. */
  skip: boolean;
  /** Why there is no browser, for the skip notice or the CI failure; empty when there is one. */
  reason: string;
}

const MISSING = `headless Chromium not found (neither ${DEFAULT_CHROMIUM} nor \`chromium\` on PATH); ` +
  'install the Debian package: apt-get install -y chromium';

export function chromiumAvailability(env: NodeJS.ProcessEnv = process.env, preferred = DEFAULT_CHROMIUM): ChromiumAvailability {
  const executablePath = findChromium(env, preferred);
  if (executablePath) return { executablePath, skip: false, reason: '' };
  if (env.CI) return { executablePath: null, skip: false, reason: `${MISSING} (required in CI: CI is set)` };
  return { executablePath: null, skip: true, reason: `${MISSING}; skipping the browser tests (they fail instead when CI is set)` };
}

/**
 * Launches headless Chromium, or throws the clear reason there is none. Call it from `beforeAll` of a
 * `describe.skipIf(availability.skip)`: in CI a missing browser then fails every test of the block with that reason.
 */
export async function launchChromium(availability: ChromiumAvailability = chromiumAvailability()): Promise<Browser> {
  if (!availability.executablePath) throw new Error(availability.reason);
  return chromium.launch({
    executablePath: availability.executablePath,
    headless: true,
    args: CHROMIUM_ARGS,
    // Playwright's default launch timeout is 3 min; a browser that has not started in 30 s will not.
    timeout: 30_000,
  });
}
