// The keychain child: one short-lived process per store operation (see keychain.ts for why). Plain CommonJS,
// so the same file runs beside the TypeScript sources and in dist. The request, secrets included, arrives on
// stdin and the answer leaves on stdout: neither is visible in `ps`. argv[2] is the resolved path of
// @napi-rs/keyring, so the child loads exactly the copy the parent found.
'use strict';
const { AsyncEntry } = require(process.argv[2]);
let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => { input += chunk; });
process.stdin.on('end', () => {
  run(JSON.parse(input)).then(
    (results) => process.stdout.write(JSON.stringify({ ok: true, results })),
    (error) => process.stdout.write(JSON.stringify({ ok: false, message: String((error && error.message) || error) })),
  );
});
async function run(request) {
  const entry = (account) => new AsyncEntry(request.service, account, { linux: { store: 'secret-service' } });
  const results = [];
  for (const op of request.ops) {
    if (op.op === 'get') results.push(await entry(op.account).getPassword());
    else if (op.op === 'set') results.push(await entry(op.account).setPassword(op.value) ?? null);
    else if (op.op === 'delete') results.push(await entry(op.account).deleteCredential());
    else if (op.op === 'ensure') {
      // The access-token cache key: kept when the account holds one (base64 of 32 bytes), else replaced by op.value.
      const found = await entry(op.account).getPassword();
      if (typeof found === 'string' && /^[A-Za-z0-9+/]{43}=$/.test(found)) results.push(found);
      else {
        await entry(op.account).setPassword(op.value);
        results.push(op.value);
      }
    }
    else if (op.op === 'index-sync') {
      let present = false;
      for (const account of op.accounts) if ((await entry(account).getPassword()) !== null) present = true;
      const index = entry(op.account);
      let names = [];
      try {
        const parsed = JSON.parse((await index.getPassword()) || '[]');
        if (Array.isArray(parsed)) names = parsed.filter((name) => typeof name === 'string');
      } catch {
        // An unreadable index is rebuilt from this profile alone.
      }
      const listed = names.includes(op.profile);
      if (present && !listed) await index.setPassword(JSON.stringify([...names, op.profile].sort()));
      if (!present && listed) {
        const rest = names.filter((name) => name !== op.profile);
        if (rest.length > 0) await index.setPassword(JSON.stringify(rest));
        else await index.deleteCredential();
      }
      results.push(present);
    } else throw new Error('unknown keychain operation');
  }
  return results;
}
