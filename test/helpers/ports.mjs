// Ports for the tests' servers and for the CLI processes they start. A test often has to name a port before
// the process that will bind it exists (a redirect URI registered with the emulator, a `--reauth-listen`
// address), so the port is free only "a moment ago". Asking the kernel for one (port 0) hands out ports from
// the ephemeral range, the same range every other test file running at the same time draws from, for its own
// servers and for the local end of every connection it makes: under several test workers a port found free
// could be taken before the CLI bound it. So each worker takes its ports from a block of its own below the
// ephemeral range (which starts at 32768 on Linux), checked free by binding it, and cycles through the block.
import { createServer } from 'node:net';

const FIRST = 20_000;
const BLOCK = 1_000;
const BLOCKS = 12;

// vitest numbers its workers from 1; anything else (a bench, a script) takes block 0.
const worker = Number.parseInt(process.env.VITEST_POOL_ID ?? '0', 10);
const block = Number.isSafeInteger(worker) && worker >= 0 ? worker % BLOCKS : 0;
// A random start, so that a test file run after another in the same worker does not reach for the ports a
// process of the earlier file may still hold.
let next = Math.floor(Math.random() * BLOCK);

function bindable(port) {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** A TCP port on 127.0.0.1 that is free now and that no other test worker will be handed. */
export async function freePort() {
  for (let tries = 0; tries < BLOCK; tries += 1) {
    const port = FIRST + block * BLOCK + (next % BLOCK);
    next += 1;
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port in ${FIRST + block * BLOCK}-${FIRST + block * BLOCK + BLOCK - 1}`);
}
