/**
 * The soak's plot (docs/soak.svg): one chart per series sampled each minute, stacked, sharing the minute axis; the
 * warm-up left grey, the two windows the verdict compares shaded, and the first window's median ±10 % drawn.
 */

export interface PlotSeries {
  title: string;
  unit: string;
  values: readonly number[];
  /** The first window's median, whose ±10 % band is drawn (undefined: no band). */
  reference: number | undefined;
}

export interface PlotWindows {
  /** Minutes (1-based, inclusive) of the warm-up, and of the two windows compared. */
  warmUp: number;
  early: readonly [number, number];
  late: readonly [number, number];
}

const WIDTH = 760;
const CHART_HEIGHT = 150;
const LEFT = 64;
const RIGHT = 16;
const TOP = 28;
const GAP = 44;

const text = (x: number, y: number, s: string, extra = ''): string =>
  `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" ${extra}>${s.replaceAll('&', '&amp;').replaceAll('<', '&lt;')}</text>`;

function chart(series: PlotSeries, windows: PlotWindows, top: number, minutes: number): string {
  const plotW = WIDTH - LEFT - RIGHT;
  const finite = series.values.filter(Number.isFinite);
  const high = Math.max(...finite, (series.reference ?? 0) * 1.1) * 1.08 || 1;
  const x = (minute: number) => LEFT + ((minute - 0.5) / minutes) * plotW;
  const y = (v: number) => top + CHART_HEIGHT - (v / high) * CHART_HEIGHT;
  const band = (from: number, to: number, fill: string) =>
    `<rect x="${x(from - 0.5).toFixed(1)}" y="${top}" width="${(x(to + 0.5) - x(from - 0.5)).toFixed(1)}" ` +
    `height="${CHART_HEIGHT}" fill="${fill}"/>`;
  const parts = [
    text(LEFT, top - 8, series.unit === '' ? series.title : `${series.title} (${series.unit})`, 'font-weight="bold"'),
    band(1, windows.warmUp, '#eeeeee'),
    band(windows.early[0], windows.early[1], '#e3effa'),
    band(windows.late[0], windows.late[1], '#fbeadf'),
    `<rect x="${LEFT}" y="${top}" width="${plotW}" height="${CHART_HEIGHT}" fill="none" stroke="#999"/>`,
  ];
  for (const fraction of [0, 0.5, 1]) {
    const v = high * fraction;
    parts.push(text(LEFT - 6, y(v) + 4, v < 10 ? v.toFixed(1) : v.toFixed(0), 'text-anchor="end"'));
  }
  if (series.reference !== undefined) {
    for (const factor of [0.9, 1.1]) {
      const ry = y(series.reference * factor).toFixed(1);
      parts.push(
        `<line x1="${LEFT}" x2="${LEFT + plotW}" y1="${ry}" y2="${ry}" stroke="#c44" stroke-dasharray="4 3"/>`,
      );
    }
  }
  const points = series.values
    .map((v, i) => (Number.isFinite(v) ? `${x(i + 1).toFixed(1)},${y(v).toFixed(1)}` : ''))
    .filter((p) => p !== '')
    .join(' ');
  parts.push(`<polyline points="${points}" fill="none" stroke="#1f5fa8" stroke-width="2"/>`);
  for (let minute = 5; minute <= minutes; minute += 5)
    parts.push(text(x(minute), top + CHART_HEIGHT + 14, String(minute), 'text-anchor="middle"'));
  return parts.join('\n');
}

/** The whole SVG document. */
export function soakSvg(series: readonly PlotSeries[], windows: PlotWindows, caption: string): string {
  const minutes = Math.max(...series.map((s) => s.values.length), 1);
  const height = TOP + series.length * (CHART_HEIGHT + GAP) + 24;
  const charts = series.map((s, i) => chart(s, windows, TOP + 16 + i * (CHART_HEIGHT + GAP), minutes));
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" ` +
      'font-family="sans-serif" font-size="11">',
    `<rect width="${WIDTH}" height="${height}" fill="white"/>`,
    text(LEFT, 16, caption),
    ...charts,
    text(
      WIDTH / 2,
      height - 8,
      'minute of the soak (grey: warm-up; blue and orange: the windows compared; ' +
        "red dashes: the blue window's median ±10 %)",
      'text-anchor="middle"',
    ),
    '</svg>',
    '',
  ].join('\n');
}
