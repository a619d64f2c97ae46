// A bench file that also runs as its own measured children: `node bench/x.mjs ROLE` takes one job from its
// parent over IPC, runs the role on it and sends back the result (or the error's stack), then exits, except
// for the roles that keep serving (an emulator the parent stops itself).
export function serveRole(roles, role, { keepRunning = [] } = {}) {
  process.once('message', (job) => {
    roles[role](job).then(
      // A keep-alive socket must not hold a finished child open.
      (result) => process.send(result, () => {
        if (!keepRunning.includes(role)) process.exit(0);
      }),
      (error) => process.send({ error: error instanceof Error ? error.stack ?? error.message : String(error) }, () => process.exit(1)),
    );
  });
}
