/** Small HTML builders the report's sections share. Every text goes through `esc`. */

export const esc = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export const pct = (x: number | null): string => (x === null ? '-' : `${(100 * x).toFixed(1)}%`);

/** A table of text cells (escaped); `cls` names the table's class. */
export function table(head: readonly string[], rows: readonly (readonly string[])[], cls = ''): string {
  const th = head.map((h) => `<th>${esc(h)}</th>`).join('');
  const body = rows.map((r) => `<tr>${r.map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`).join('');
  return `<table${cls ? ` class="${cls}"` : ''}><thead><tr>${th}</tr></thead><tbody>${body}</tbody></table>`;
}

/** A chart card: a title, an optional note (HTML), and the canvas the page script draws on. */
export function card(title: string, id: string, note = '', size = ''): string {
  return `<div class="card"><h3>${esc(title)}</h3>${note}<div class="chart${size ? ` ${size}` : ''}"><canvas id="${id}"></canvas></div></div>`;
}

/** A card in place of a chart whose figure the run did not record. */
export function notRecorded(title: string, why: string): string {
  return `<div class="card missing"><h3>${esc(title)}</h3><p class="meta">not recorded: ${esc(why)}</p></div>`;
}
