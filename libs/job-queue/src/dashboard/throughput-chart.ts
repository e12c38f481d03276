import type { ThroughputMinute } from '../persistence/job.store.js';
import { escapeHtml } from './html.js';

const WIDTH = 720;
const HEIGHT = 160;

/** The last hour's outcomes per minute as stacked SVG bars: completed, failed, dead. */
export function throughputChart(minutes: readonly ThroughputMinute[]): string {
  const max = Math.max(1, ...minutes.map((m) => m.completed + m.failed + m.dead));
  const slot = WIDTH / Math.max(1, minutes.length);
  const bar = Math.max(1, slot - 2);
  const bars = minutes
    .map((minute, i) => {
      const x = (i * slot).toFixed(1);
      let y = HEIGHT;
      const parts = (['completed', 'failed', 'dead'] as const).map((kind) => {
        const h = (minute[kind] / max) * (HEIGHT - 4);
        y -= h;
        return h > 0 ? `<rect class="bar-${kind}" x="${x}" y="${y.toFixed(1)}" width="${bar.toFixed(1)}" height="${h.toFixed(1)}"/>` : '';
      });
      const label = `${new Date(minute.minute).toISOString().slice(11, 16)} UTC: ${minute.completed} completed, ${minute.failed} failed, ${minute.dead} dead`;
      return `<g><title>${escapeHtml(label)}</title><rect class="bar-hit" x="${x}" y="0" width="${slot.toFixed(1)}" height="${HEIGHT}"/>${parts.join('')}</g>`;
    })
    .join('');
  const total = minutes.reduce((sum, m) => sum + m.completed, 0);
  return `<figure class="chart">
  <svg viewBox="0 0 ${WIDTH} ${HEIGHT}" preserveAspectRatio="none" role="img" aria-label="Jobs per minute, last hour">
    <line class="axis" x1="0" y1="${HEIGHT - 0.5}" x2="${WIDTH}" y2="${HEIGHT - 0.5}"/>${bars}
  </svg>
  <div class="ticks"><span>${minutes.length} min ago</span><span>now</span></div>
  <figcaption><span><i class="dot dot-completed"></i>completed</span><span><i class="dot dot-failed"></i>failed</span><span><i class="dot dot-dead"></i>dead</span>
    <span class="muted">peak ${max}/min · ${total} completed in the last hour</span></figcaption>
</figure>`;
}
