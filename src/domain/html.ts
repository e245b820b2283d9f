/** HTML text of the pages kessai serves itself: every interpolated value goes through `escapeHtml`. */

/** Text or an attribute value as HTML: `& < > " '` as character references. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Integer yen as the page shows it: `¥12,345` (grouping only; yen has no minor unit). */
export function formatYen(amount: number): string {
  return `¥${amount.toLocaleString('en-US')}`;
}
