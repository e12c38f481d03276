import { escapeHtml } from './html.js';

/** The page shell: system fonts, status colours, no request leaves the app (no CDN, no web fonts). */
const STYLE = `
:root { --bg:#f6f7f9; --card:#fff; --ink:#1b1f24; --muted:#667085; --line:#e4e7ec; --accent:#3538cd;
  --pending:#2e90fa; --processing:#7a5af8; --completed:#12b76a; --failed:#f79009; --dead:#f04438; --cancelled:#98a2b3; --blocked:#667085; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif; color:var(--ink); background:var(--bg); }
header { background:#101828; color:#fff; padding:0 24px; display:flex; align-items:center; gap:28px; height:56px; }
header .brand { font-weight:650; letter-spacing:.2px; font-size:16px; }
header .brand span { color:#a4bcfd; font-weight:500; }
header nav a { color:#d0d5dd; text-decoration:none; margin-right:18px; font-weight:500; }
header nav a.active, header nav a:hover { color:#fff; }
header .live { margin-left:auto; font-size:12px; color:#98a2b3; }
main { max-width:1180px; margin:0 auto; padding:24px; }
h1 { font-size:22px; margin:0 0 16px; } h2 { font-size:15px; margin:0 0 12px; color:#344054; }
.grid { display:grid; gap:16px; } .cols-stats { grid-template-columns:repeat(auto-fit,minmax(120px,1fr)); } .cols-2 { grid-template-columns:1fr 1fr; }
.card { background:var(--card); border:1px solid var(--line); border-radius:10px; padding:16px 18px; }
.stat { border-top:3px solid var(--c); } .stat .n { font-size:26px; font-weight:650; } .stat .l { color:var(--muted); text-transform:capitalize; }
.stat a { color:inherit; text-decoration:none; }
table { width:100%; border-collapse:collapse; } th { text-align:left; color:var(--muted); font-weight:550; font-size:12px; text-transform:uppercase; letter-spacing:.4px; }
th, td { padding:8px 10px; border-bottom:1px solid var(--line); vertical-align:top; } tr:last-child td { border-bottom:none; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; } a { color:var(--accent); }
.badge { display:inline-block; padding:1px 8px; border-radius:999px; font-size:12px; font-weight:600; color:#fff; background:var(--c); }
.s-pending{--c:var(--pending)} .s-processing{--c:var(--processing)} .s-completed{--c:var(--completed)} .s-failed{--c:var(--failed)}
.s-dead{--c:var(--dead)} .s-cancelled{--c:var(--cancelled)} .s-blocked{--c:var(--blocked)}
.muted { color:var(--muted); } .err { color:#b42318; font-family:ui-monospace,Menlo,Consolas,monospace; font-size:12.5px; white-space:pre-wrap; word-break:break-word; }
pre.json { background:#0c111d; color:#e4e7ec; padding:12px 14px; border-radius:8px; overflow:auto; font:12.5px/1.45 ui-monospace,Menlo,Consolas,monospace; margin:0; max-height:360px; }
button { font:inherit; border:1px solid var(--line); background:#fff; border-radius:7px; padding:4px 12px; cursor:pointer; font-weight:550; }
button.primary { background:var(--accent); color:#fff; border-color:var(--accent); } button.danger { color:#b42318; border-color:#fda29b; }
button:disabled { opacity:.5; cursor:default; }
form.filters { display:flex; gap:8px; margin-bottom:14px; align-items:center; } select, input { font:inherit; padding:4px 8px; border:1px solid var(--line); border-radius:7px; background:#fff; }
.chart svg { width:100%; height:160px; display:block; } .chart .axis { stroke:var(--line); } .bar-hit { fill:transparent; }
.bar-completed { fill:var(--completed); } .bar-failed { fill:var(--failed); } .bar-dead { fill:var(--dead); }
.chart figcaption { display:flex; gap:16px; font-size:12px; margin-top:8px; } .dot { display:inline-block; width:9px; height:9px; border-radius:2px; margin-right:5px; }
.dot-completed{background:var(--completed)} .dot-failed{background:var(--failed)} .dot-dead{background:var(--dead)}
.chart { margin:0; } .chart .ticks { display:flex; justify-content:space-between; font-size:11px; color:var(--muted); margin-top:2px; } dl.fields { display:grid; grid-template-columns:160px 1fr; gap:6px 12px; margin:0; } dl.fields dt { color:var(--muted); }
.toast { position:fixed; bottom:20px; right:20px; background:#101828; color:#fff; padding:10px 14px; border-radius:8px; display:none; }
.empty { color:var(--muted); padding:12px 0; }
`;

/**
 * A small script, no framework: buttons POST actions with the anti-forgery header (a cross-site
 * form cannot send it), and the page reloads itself every 5 s while visible.
 */
const SCRIPT = `
(function () {
  var base = document.body.getAttribute('data-base');
  function toast(text) { var t = document.getElementById('toast'); t.textContent = text; t.style.display = 'block'; setTimeout(function () { t.style.display = 'none'; }, 4000); }
  document.addEventListener('click', function (event) {
    var button = event.target.closest('button[data-action]');
    if (!button) return;
    var confirmText = button.getAttribute('data-confirm');
    if (confirmText && !window.confirm(confirmText)) return;
    button.disabled = true;
    fetch(base + '/api/' + button.getAttribute('data-action'), { method: 'POST', headers: { 'content-type': 'application/json', 'x-job-queue-csrf': '1' }, body: '{}' })
      .then(function (response) { return response.json().then(function (body) { return { ok: response.ok, body: body }; }); })
      .then(function (result) { if (!result.ok) { button.disabled = false; toast(result.body.message || 'Refused'); } else { location.reload(); } })
      .catch(function (error) { button.disabled = false; toast(String(error)); });
  });
  document.querySelectorAll('time[datetime]').forEach(function (el) { el.textContent = new Date(el.getAttribute('datetime')).toLocaleString(); });
  if (document.body.hasAttribute('data-refresh')) setInterval(function () { if (!document.hidden && !document.querySelector('button:disabled')) location.reload(); }, 5000);
})();
`;

export type DashboardTab = 'overview' | 'jobs' | 'dead';

/** The whole page around a body; `base` is the dashboard's path (links and API calls hang off it). */
export function page(base: string, title: string, tab: DashboardTab, body: string, refresh = true): string {
  const link = (href: string, label: string, name: DashboardTab) =>
    `<a href="${escapeHtml(base + href)}"${tab === name ? ' class="active"' : ''}>${label}</a>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · auto-job-queue</title><style>${STYLE}</style></head>
<body data-base="${escapeHtml(base)}"${refresh ? ' data-refresh' : ''}>
<header><div class="brand">auto-job-queue <span>dashboard</span></div>
<nav>${link('', 'Overview', 'overview')}${link('/jobs', 'Jobs', 'jobs')}${link('/jobs?status=dead', 'Dead letters', 'dead')}</nav>
<div class="live">${refresh ? 'refreshes every 5 s' : ''}</div></header>
<main>${body}</main><div id="toast" class="toast" role="status"></div>
<script>${SCRIPT}</script></body></html>`;
}
