// No child process inherits a secret: setup opens the browser through `open` (xdg-open, then $BROWSER and
// whatever that starts), and that whole chain gets the environment of the syncauth process. A fake browser
// records the environment it was started with.
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { newHome, onboardingEnv, runWithApproval, startOnboarding, type Home, type Onboarding } from '../helpers/onboarding.js';
import { waitFor } from '../helpers/wait.js';

let ob: Onboarding;
let home: Home;

beforeAll(async () => {
  ob = await startOnboarding({ app: { appKey: 'childEnvAppKey0451', appSecret: 'childEnvAppSecret7719' }, apiKey: 'childEnvApiKey3306' });
  home = newHome();
});
afterAll(async () => ob?.emulator.close());

it('the browser launcher and the browser get no secret in their environment', async () => {
  const recorded = path.join(home.dir, 'browser-env.txt');
  const browser = path.join(home.dir, 'fake-browser');
  writeFileSync(browser, `#!/bin/sh\nenv > '${recorded}.part' && mv '${recorded}.part' '${recorded}'\n`);
  chmodSync(browser, 0o755);
  const env = onboardingEnv(ob, home, { SYNCAUTH_REFRESH_TOKEN: undefined, BROWSER: browser, DISPLAY: undefined, WAYLAND_DISPLAY: undefined });
  // Loopback mode with the browser opened: the fake browser only records, the test approves the printed URL.
  const result = await runWithApproval(['setup', '--yes'], { env, cwd: home.dir });
  expect(result.code, result.stderr).toBe(0);

  const childEnv = await waitFor('the fake browser to record its environment', () => (existsSync(recorded) ? readFileSync(recorded, 'utf8') : undefined), 5_000);
  expect(childEnv).toContain(`BROWSER=${browser}`);
  const secrets = { app_key: ob.app.appKey, app_secret: ob.app.appSecret, api_key: ob.apiKey, store_key: home.storeKey };
  for (const [name, value] of Object.entries(secrets)) expect({ name, leaked: childEnv.includes(value) }).toEqual({ name, leaked: false });
  for (const variable of ['SYNCAUTH_APP_KEY', 'SYNCAUTH_APP_SECRET', 'SYNCAUTH_API_KEY', 'SYNCAUTH_STORE_KEY', 'SYNCAUTH_REFRESH_TOKEN']) {
    expect(childEnv).not.toContain(`${variable}=`);
  }
  // The non-secret settings are still there: only secrets are withheld.
  expect(childEnv).toContain('SYNCAUTH_STORE=file');
});
