// Dropbox's "Connected apps" (Settings, Connected apps), where the account's owner unlinks an app: every grant
// of that app for that account is revoked at once, and the app's refresh tokens meet `invalid_grant` from then
// on. The emulator's own page for it, `GET /account/connected_apps`, lists the apps each account has granted
// with a Disconnect button; `POST /account/connected_apps/disconnect` (form fields `app_key` and optionally
// `account`, the default account otherwise) does the same for a script. The one grant behind an access token is
// revoked the way an app does it, with Dropbox's own `POST /2/auth/token/revoke` (dropbox-api.ts).
import type { Router } from 'express';
import express from 'express';
import { bodyText, mediaType, queryParams, type EmulatorContext } from './context.js';
import { connectedAppsPage, sendHtml } from './pages.js';

/** Revokes every live grant of the app for the account; returns how many were live. */
export function disconnectApp(ctx: EmulatorContext, appKey: string, accountId: string): number {
  let revoked = 0;
  for (const grant of ctx.state.grants.values()) {
    if (grant.appKey !== appKey || grant.accountId !== accountId || grant.revokedAt !== null) continue;
    grant.revokedAt = ctx.options.now();
    revoked += 1;
  }
  return revoked;
}

export function connectedAppsRouter(ctx: EmulatorContext): Router {
  const router = express.Router();

  router.get('/account/connected_apps', (_req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    const live = [...ctx.state.grants.values()].filter((g) => g.revokedAt === null);
    const rows = ctx.state.accounts.flatMap((account) =>
      ctx.options.apps
        .filter((app) => live.some((g) => g.appKey === app.appKey && g.accountId === account.accountId))
        .map((app) => ({ appKey: app.appKey, appName: app.name, accountId: account.accountId, email: account.email })),
    );
    sendHtml(res, 200, connectedAppsPage(rows));
  });

  router.post('/account/connected_apps/disconnect', (req, res) => {
    const form = new URLSearchParams(mediaType(req) === 'application/x-www-form-urlencoded' ? bodyText(req) : '');
    const query = queryParams(req);
    const appKey = form.get('app_key') ?? query.get('app_key') ?? '';
    const accountId = form.get('account') ?? query.get('account') ?? ctx.state.account.accountId;
    if (!ctx.options.apps.some((a) => a.appKey === appKey)) {
      res.status(400).json({ error: 'unknown_app', error_description: `no app has the key "${appKey}": pass app_key=<the app key>` });
      return;
    }
    if (!ctx.state.accounts.some((a) => a.accountId === accountId)) {
      res.status(400).json({ error: 'unknown_account', error_description: `no account "${accountId}"` });
      return;
    }
    const revoked = disconnectApp(ctx, appKey, accountId);
    // The page's own button comes back to the list; a script gets what was done.
    if ((req.headers.accept ?? '').includes('text/html')) {
      res.redirect(303, '/account/connected_apps');
      return;
    }
    res.json({ app_key: appKey, account_id: accountId, grants_revoked: revoked });
  });

  return router;
}
