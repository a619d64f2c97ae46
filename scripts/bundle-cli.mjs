// The CLI as users run it: dist/cli/main.js (tsc's output, the package's `bin`) replaced by an esbuild bundle
// of itself, its lazily imported modules split into chunks beside it (dist/cli/chunk-*.js), so that a command
// loads a few files rather than a hundred modules (zod alone is ninety-five). The library (dist/index.js and
// everything it imports) stays as tsc wrote it: no file but dist/cli/main.js is changed.
//
// Paths stay those of dist/: every `import.meta.url` of a file of ours is rewritten to that file's own place in
// dist/ (relative to the chunk, so the package can be moved), so `../../package.json`, the prerendered help
// (dist/cli/help.txt), the keychain's child script (dist/credentials/keychain-child.cjs) and the packages
// loaded through createRequire (undici, pino, prom-client) resolve exactly as from the unbundled files.
// Left out of the bundle: Node's own modules, the native keychain module, and packages that find their own
// files by path or are loaded only by commands that start rarely (see EXTERNAL).
import { build } from 'esbuild';
import { chmod, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = path.join(root, 'dist');
const outdir = path.join(dist, 'cli');

// @napi-rs/keyring is native; `open` runs its own xdg-open script by path; express and ioredis are CommonJS
// trees loaded only by the commands that serve or use Redis, where a bundle gains nothing at start; undici, pino
// and prom-client are loaded through
// createRequire, which a bundler does not follow; @clack/prompts (setup's questions) is large and loads with
// setup only, so it stays where npm put it and the package does not carry it twice. yaml is bundled although
// only the daemon loads it: its seventy CommonJS files cost the idle daemon 3 MiB of memory more (measured).
// node-cron is bundled so that it reads the time of day without ICU (see cronTime below).
const EXTERNAL = ['@napi-rs/keyring', 'open', 'express', 'ioredis', 'undici', 'pino', 'prom-client', '@clack/prompts'];

// node-cron builds every date it looks at with Intl.DateTimeFormat, time zone or not; the first formatter loads
// ICU's locale data, 7 MiB of the idle daemon's memory (measured). In the bundle its `Intl` is
// dist/daemon/cron-local-time.js's, which answers from Date's local fields where no time zone is named. Its
// background tasks (never used here) fork a file beside node-cron's own entry, which `import.meta.resolve` finds
// from the chunk as it would from a file of ours.
const CRON_DIST = /[\\/]node_modules[\\/]node-cron[\\/]dist[\\/]/;
const CRON_INTL = path.join(dist, 'daemon/cron-local-time.js');
async function cronTime(file) {
  const source = await readFile(file, 'utf8');
  const name = path.basename(file);
  if (name === 'node-cron.js') {
    if (!source.includes('import.meta.url')) throw new Error(`node-cron's ${name} no longer names import.meta.url: review cronTime in ${path.relative(root, fileURLToPath(import.meta.url))}`);
    return source.replaceAll('import.meta.url', 'import.meta.resolve("node-cron")');
  }
  if (/\bimport\.meta\b|\b__dirname\b|\b__filename\b/.test(source)) throw new Error(`node-cron's ${name} locates files by its own path: review cronTime`);
  if (name !== '_shared.js') return source;
  if (!/\bnew Intl\.DateTimeFormat\(/.test(source) || /\bconst Intl\b|\bglobalThis\.Intl\b/.test(source)) {
    throw new Error(`node-cron's ${name} no longer reads dates as cron-local-time.js expects: review cronTime`);
  }
  return `import { cronIntl as Intl } from ${JSON.stringify(CRON_INTL)};\n${source}`;
}

/** Rewrites `import.meta.url` in our files to the file's URL in dist/, relative to the chunk it lands in. */
const keepDistPaths = {
  name: 'keep-dist-paths',
  setup(builder) {
    builder.onLoad({ filter: /\.js$/ }, async (args) => {
      if (CRON_DIST.test(args.path)) return { contents: await cronTime(args.path), loader: 'js', resolveDir: path.dirname(args.path) };
      const source = await readFile(args.path, 'utf8');
      if (!args.path.startsWith(dist + path.sep)) {
        // A bundled package that finds files beside itself would find them beside the chunk instead.
        // (Comment lines aside: commander names __dirname in its documentation only.)
        const code = source.split('\n').filter((line) => !/^\s*(\*|\/\/)/.test(line)).join('\n');
        if (/\bimport\.meta\.url\b|\b__dirname\b|\b__filename\b/.test(code)) {
          throw new Error(`${path.relative(root, args.path)} locates files by its own path: add its package to EXTERNAL`);
        }
        return undefined;
      }
      const relative = path.relative(outdir, args.path).split(path.sep).join('/');
      return { contents: source.replaceAll('import.meta.url', `new URL(${JSON.stringify(relative)}, import.meta.url).href`), loader: 'js' };
    });
  },
};

const BANNER = "import { createRequire as __syncauthRequire } from 'node:module'; const require = __syncauthRequire(import.meta.url);";
const entry = path.join(dist, 'cli/main.js');
if ((await readFile(entry, 'utf8')).includes(BANNER)) {
  throw new Error(`${path.relative(root, entry)} is already the bundle: \`npm run build\` starts again from tsc's output`);
}

const result = await build({
  metafile: true,
  entryPoints: { main: entry },
  outdir,
  // The entry is bundled in place (tsc's main.js is its input); each build starts from a fresh dist/.
  allowOverwrite: true,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  // Minified or not starts alike (measured); minified is the smaller package. SYNCAUTH_BUNDLE_MINIFY=0 to read it.
  minify: process.env.SYNCAUTH_BUNDLE_MINIFY !== '0',
  chunkNames: 'chunk-[hash]',
  external: EXTERNAL,
  // CommonJS packages in the bundle (commander) call require() for Node's modules.
  banner: { js: BANNER },
  plugins: [keepDistPaths],
  logLevel: 'warning',
  legalComments: 'none',
});

// `import { z } from 'zod'` hands the bundler zod's whole namespace, every locale included (a quarter of a
// megabyte that each command using zod would compile); `import * as z from 'zod'` lets it keep what is used.
const locales = Object.values(result.metafile.outputs)
  .flatMap((output) => Object.entries(output.inputs))
  .filter(([input, { bytesInOutput }]) => bytesInOutput > 0 && /node_modules\/zod\/.*\/locales\/(?!en\.js$)/.test(input))
  .map(([input]) => input);
if (locales.length > 0) {
  throw new Error(`the CLI bundle holds zod's locales (${locales.slice(0, 3).join(', ')}, …): import zod as \`import * as z from 'zod'\``);
}

// The bin is the bundle esbuild has just written, with the mode of a new file (0644). `npm install -g .` links a
// clone and sets the bit once; every later build would leave the link pointing at a file no one may run.
await chmod(entry, 0o755);
