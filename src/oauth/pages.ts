// The small pages the browser shows after Dropbox redirects to the loopback server. Every value that came
// from the request or from Dropbox is escaped before it is placed in the HTML.

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for an HTML element or a quoted attribute. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ENTITIES[c] ?? c);
}

/** A one-message page: a title and a few paragraphs. */
export interface Page {
  title: string;
  /** Plain-text paragraphs; escaped here. */
  paragraphs: string[];
  ok: boolean;
}

/** The complete HTML document of a page, every text escaped. */
export function renderPage(page: Page): string {
  const colour = page.ok ? '#0a7d32' : '#b3261e';
  const body = page.paragraphs.map((p) => `<p>${escapeHtml(p)}</p>`).join('\n');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(page.title)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;line-height:1.5}h1{color:${colour};font-size:1.4rem}</style>
</head>
<body>
<h1>${escapeHtml(page.title)}</h1>
${body}
</body>
</html>
`;
}

/** What the browser shows once the code has arrived. */
export const SUCCESS_PAGE: Page = {
  title: 'syncauth is authorized',
  paragraphs: ['syncauth is authorized; you can close this tab and return to the terminal.'],
  ok: true,
};
