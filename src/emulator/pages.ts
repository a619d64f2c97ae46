// The few HTML pages of the authorize flow. Every interpolated value is escaped: app names, scopes and
// request parameters come from whoever built the URL.
import type { Response } from 'express';

export function escapeHtml(value: string): string {
  return value
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&#39;');
}

/** Sends a page that no other site may frame (the Allow button must not be clickjacked) and that runs no script. */
export function sendHtml(res: Response, status: number, html: string): void {
  res
    .status(status)
    .setHeader('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
    .setHeader('X-Frame-Options', 'DENY')
    .type('html')
    .send(html);
}

function layout(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 34rem; margin: 3rem auto; padding: 0 1rem; color: #1e1919; }
h1 { font-size: 1.4rem; }
ul { padding-left: 1.2rem; }
.actions { display: flex; gap: .75rem; margin-top: 1.5rem; }
button { font-size: 1rem; padding: .5rem 1.25rem; border-radius: .25rem; border: 1px solid #0061fe; cursor: pointer; }
#allow { background: #0061fe; color: #fff; }
#deny { background: #fff; color: #0061fe; }
code#code { display: block; font-size: 1.2rem; padding: .75rem; background: #f7f5f2; word-break: break-all; }
</style>
</head>
<body>
${body}
</body>
</html>
`;
}

/** Dropbox's own wording for a request it refuses to show (see dropbox-oauth.md §1.3). */
export function badRequestPage(details: string): string {
  return layout(
    'Dropbox - 400',
    `<h1>Error (400)</h1>
<p>It seems the app you were using submitted a bad request. If you would like to report this error to the
app's developer, include the information below.</p>
<h2>More details for developers</h2>
<p id="details">${escapeHtml(details)}</p>`,
  );
}

export function errorPage(status: number, reason: string): string {
  return layout(`Dropbox - ${status}`, `<h1>Error (${status})</h1>\n<p id="details">${escapeHtml(reason)}</p>`);
}

const SCOPE_TEXT: Record<string, string> = {
  'account_info.read': 'View basic information about your Dropbox account such as your username, email, and country',
  'files.metadata.read': 'View information about files and folders in its app folder',
  'files.metadata.write': 'View and edit information about files and folders in its app folder',
  'files.content.read': 'View content of files and folders in its app folder',
  'files.content.write': 'Edit content of files and folders in its app folder',
};

export function authorizePage(input: {
  appName: string;
  folderName: string;
  scopes: readonly string[];
  nonce: string;
  email: string;
  /** The accounts the user may approve as; the first is signed in. */
  accounts?: readonly { accountId: string; email: string }[];
}): string {
  const accounts = (input.accounts ?? []).length > 1
    ? `<fieldset id="accounts"><legend>Approve as</legend>
${(input.accounts ?? []).map((a, i) => `<label><input type="radio" name="account" id="account-${i}" value="${escapeHtml(a.accountId)}"${i === 0 ? ' checked' : ''}> ${escapeHtml(a.email)}</label>`).join('\n')}
</fieldset>`
    : '';
  const scopes = input.scopes
    .map((s) => `<li data-scope="${escapeHtml(s)}">${escapeHtml(SCOPE_TEXT[s] ?? s)} <code>${escapeHtml(s)}</code></li>`)
    .join('\n');
  return layout(
    `API Request Authorization - Dropbox`,
    `<h1 id="app-name">${escapeHtml(input.appName)} would like access to its own folder, <span id="app-folder">Apps/${escapeHtml(input.folderName)}</span>, inside your Dropbox</h1>
<p>Signed in as <span id="account">${escapeHtml(input.email)}</span>.</p>
<p>This app will be able to:</p>
<ul id="scopes">
${scopes}
</ul>
<form method="post" action="/oauth2/authorize">
<input type="hidden" name="nonce" value="${escapeHtml(input.nonce)}">
${accounts}
<div class="actions">
<button id="deny" type="submit" name="decision" value="deny">Deny</button>
<button id="allow" type="submit" name="decision" value="allow">Allow</button>
</div>
</form>`,
  );
}

/** The no-redirect flow: the user copies the code back into the app. */
export function codePage(appName: string, code: string): string {
  return layout(
    'Dropbox - Access code generated',
    `<h1>Access code generated</h1>
<p>Enter this code into ${escapeHtml(appName)} to finish the process.</p>
<code id="code">${escapeHtml(code)}</code>`,
  );
}

export function deniedPage(appName: string): string {
  return layout(
    'Dropbox - Access denied',
    `<h1 id="denied">Access denied</h1>
<p>You chose not to give ${escapeHtml(appName)} access to your Dropbox. You can close this page.</p>`,
  );
}

/** The account's connected apps, each with a Disconnect button (connected-apps.ts). */
export function connectedAppsPage(rows: { appKey: string; appName: string; accountId: string; email: string }[]): string {
  const items = rows.map((r) => `<li><span class="app">${escapeHtml(r.appName)}</span> (${escapeHtml(r.email)})
<form method="post" action="/account/connected_apps/disconnect">
<input type="hidden" name="app_key" value="${escapeHtml(r.appKey)}">
<input type="hidden" name="account" value="${escapeHtml(r.accountId)}">
<button type="submit" class="disconnect">Disconnect</button>
</form></li>`);
  return layout(
    'Connected apps - Dropbox',
    `<h1>Connected apps</h1>
${items.length ? `<ul id="connected-apps">\n${items.join('\n')}\n</ul>` : '<p id="none">No app has access to these accounts.</p>'}`,
  );
}
