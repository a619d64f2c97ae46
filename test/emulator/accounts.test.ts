// The emulated Dropbox has two accounts a person can approve as: the consent page offers both (the first
// checked), and each grant belongs to the account that approved it, in the code exchange's account_id and in
// users/get_current_account alike. An unknown account is refused.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_APP, startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { createAuthorizationRequest, exchangeCode, getCurrentAccount } from '../../src/oauth/index.js';

const REDIRECT = DEFAULT_APP.redirectUris[0] as string;
let emu: RunningEmulator;

beforeAll(async () => {
  emu = await startEmulator({ autoApprove: false });
});
afterAll(() => emu.close());

async function approveAs(account: string | undefined): Promise<{ status: number; accountId?: string; current?: string }> {
  const request = createAuthorizationRequest({ authorizeUrl: emu.authorizeUrl, appKey: DEFAULT_APP.appKey, redirectUri: REDIRECT });
  const html = await (await fetch(request.url)).text();
  const nonce = /name="nonce" value="([^"]+)"/.exec(html)?.[1] as string;
  const answer = await fetch(new URL('/oauth2/authorize', emu.url), {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ nonce, decision: 'allow', ...(account !== undefined ? { account } : {}) }).toString(),
  });
  const location = answer.headers.get('location');
  if (!location) return { status: answer.status };
  const tokens = await exchangeCode({
    tokenUrl: emu.tokenUrl, app: DEFAULT_APP, code: new URL(location).searchParams.get('code') as string, redirectUri: REDIRECT, codeVerifier: request.codeVerifier,
  });
  const current = await getCurrentAccount({ apiUrl: emu.apiUrl, accessToken: tokens.accessToken });
  return { status: answer.status, ...(tokens.accountId ? { accountId: tokens.accountId } : {}), current: current.accountId };
}

describe('the emulated accounts', () => {
  it('offers both accounts on the consent page, the signed-in one checked', async () => {
    const request = createAuthorizationRequest({ authorizeUrl: emu.authorizeUrl, appKey: DEFAULT_APP.appKey, redirectUri: REDIRECT });
    const html = await (await fetch(request.url)).text();
    const [first, second] = emu.state.accounts;
    expect(emu.state.accounts).toHaveLength(2);
    expect(first?.accountId).toBe(emu.state.account.accountId);
    expect(second?.accountId).not.toBe(first?.accountId);
    expect(html).toContain(`value="${first?.accountId}" checked`);
    expect(html).toContain(`value="${second?.accountId}">`);
  });

  it('each grant belongs to the account that approved it', async () => {
    const [first, second] = emu.state.accounts;
    expect(await approveAs(undefined)).toMatchObject({ status: 302, accountId: first?.accountId, current: first?.accountId });
    expect(await approveAs(second?.accountId)).toMatchObject({ status: 302, accountId: second?.accountId, current: second?.accountId });
    expect(await approveAs(first?.accountId)).toMatchObject({ status: 302, accountId: first?.accountId, current: first?.accountId });
    expect((await approveAs('dbid:AAnobody')).status).toBe(400);
  });
});
