const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text for HTML content and attribute values: a payload holding `<script>` shows as text. */
export function escapeHtml(value: unknown): string {
  const text = value === null || value === undefined ? '' : typeof value === 'string' ? value : String(value);
  return text.replace(/[&<>"']/g, (char) => ESCAPES[char]);
}

/** A value as indented JSON, escaped for a <pre>. */
export function jsonBlock(value: unknown): string {
  return `<pre class="json">${escapeHtml(value === undefined ? 'null' : JSON.stringify(value, null, 2))}</pre>`;
}

/** A time as people read it, in the browser's zone (the script rewrites <time> elements). */
export function time(value: Date | string | null | undefined): string {
  if (!value) return '<span class="muted">–</span>';
  const iso = value instanceof Date ? value.toISOString() : value;
  return `<time datetime="${escapeHtml(iso)}">${escapeHtml(iso.replace('T', ' ').replace(/\.\d{3}Z$/, ' UTC'))}</time>`;
}
