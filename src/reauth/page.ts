// The re-authorization page's HTML: plain documents, no script, every value escaped. Nothing secret is ever
// placed in a page: the link's own token appears only as the paste form's action (the URL the browser already
// holds), the state only as a hidden field and inside the Dropbox URL, the paste form's token only as a hidden
// field, and none of them is a grant.
import { escapeHtml } from '../oauth/pages.js';

const STYLE =
  'body{font-family:system-ui,sans-serif;max-width:38rem;margin:3rem auto;padding:0 1rem;line-height:1.5;color:#1e1919}' +
  'h1{font-size:1.4rem}h1.ok{color:#0a7d32}h1.fail{color:#b3261e}dt{font-weight:600}dd{margin:0 0 .5rem 0}' +
  'a.button,button{display:inline-block;font-size:1rem;padding:.5rem 1.25rem;border-radius:.25rem;border:1px solid #0061fe;background:#0061fe;color:#fff;text-decoration:none;cursor:pointer}' +
  'input[type=text]{font-size:1rem;padding:.4rem;width:24rem;max-width:100%}details{margin-top:2rem}';

function layout(title: string, body: string, kind?: 'ok' | 'fail'): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escapeHtml(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<h1${kind ? ` class="${kind}"` : ''}>${escapeHtml(title)}</h1>
${body}
</body>
</html>
`;
}

/** What every wrong, used or expired link, and anything else asked of the listener, gets: one body for all. */
export const NOT_FOUND_PAGE = layout('Not found', '<p>This link is not valid. It may have expired or been used already; ask for a new one.</p>');

export const RATE_LIMITED_PAGE = layout('Too many requests', '<p>Too many invalid links were opened from here. Wait a minute and try again.</p>');

export const FORBIDDEN_PAGE = layout('Refused', '<p>This form must be sent from the page it came from. Open the link again.</p>');

export interface StartPage {
  profile: string;
  folder?: string;
  accountId?: string;
  accountName?: string;
  /** Dropbox's authorize URL with state, PKCE and the redirect back here. */
  authorizeUrl: string;
  /** The same without a redirect: Dropbox shows a code to paste below. */
  codeDisplayUrl: string;
  /** The paste form's own state (bound to the link like the other one). */
  pasteState: string;
  /** The paste form's token (server.ts pasteFormToken): only this page holds it, never a URL. */
  formToken: string;
  /** The page's own path, where the paste form posts. */
  action: string;
  allowAccountChange: boolean;
}

export function startPage(page: StartPage): string {
  const account = page.accountId
    ? `${page.accountName ? `${escapeHtml(page.accountName)} ` : ''}<code id="account">${escapeHtml(page.accountId)}</code>`
    : '<span id="account">not recorded</span>';
  const accountRule = page.allowAccountChange
    ? '<p id="account-rule">This link may change the Dropbox account: whichever account you approve with becomes the profile\'s.</p>'
    : page.accountId
      ? '<p id="account-rule">Sign in to Dropbox as this same account. A grant of another account is refused and revoked at once: it would point the connector at someone else\'s files.</p>'
      : '<p id="account-rule">No account is recorded for this profile, so this link cannot prove which account is its own: ask for a link that allows choosing the account (<code>syncauth reauth-link --allow-account-change</code>).</p>';
  return layout(
    'Authorize syncauth again',
    `<p>Dropbox no longer honours the grant syncauth used for this folder. Authorize again to resume it.</p>
<dl>
<dt>Profile</dt><dd id="profile">${escapeHtml(page.profile)}</dd>
<dt>Folder</dt><dd id="folder">${page.folder ? escapeHtml(page.folder) : 'not recorded'}</dd>
<dt>Dropbox account that granted access before</dt><dd>${account}</dd>
</dl>
${accountRule}
<p><a class="button" id="authorize" href="${escapeHtml(page.authorizeUrl)}">Continue to Dropbox</a></p>
<details id="paste">
<summary>No redirect back here? Paste the code instead</summary>
<p>Where the address of this page cannot be registered with the Dropbox app, <a id="code-display" href="${escapeHtml(page.codeDisplayUrl)}" target="_blank" rel="noopener noreferrer">let Dropbox show a code</a>, then paste it here.</p>
<form method="post" action="${escapeHtml(page.action)}">
<input type="hidden" name="state" value="${escapeHtml(page.pasteState)}">
<input type="hidden" name="form_token" value="${escapeHtml(page.formToken)}">
<label>Code <input type="text" name="code" id="code" autocomplete="off" required></label>
<button type="submit" id="submit-code">Finish</button>
</form>
</details>`,
  );
}

export function resultPage(input: { ok: boolean; title: string; paragraphs: string[] }): string {
  return layout(input.title, input.paragraphs.map((p) => `<p>${escapeHtml(p)}</p>`).join('\n'), input.ok ? 'ok' : 'fail');
}
