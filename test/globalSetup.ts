// The process-level tests run the built CLI, as users do; `npm test` builds first. Refuse to run them
// against a missing build rather than fail in a confusing way.
import { existsSync } from 'node:fs';
import { CLI } from './helpers/cli.js';

export default function setup(): void {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first (npm test does)`);
}
