/**
 * Usage over time: downloads and uploads per day or month, drawn by uPlot (loaded with the first chart,
 * so pages without one do not pay for it). The numbers are also in a table for screen readers and for
 * reading exact values.
 */
import { useEffect, useRef } from 'preact/hooks';
import type uPlot from 'uplot';
import { formatBytes } from './format.ts';
import { Table } from './ui.tsx';

export interface UsageRow {
  /** First day of the day or month (YYYY-MM-DD, the panel's zone). */
  start: string;
  rx_bytes: number;
  tx_bytes: number;
}

/** The date `YYYY-MM-DD` `days` calendar days after `date` (before, when negative). */
function addDays(date: string, days: number): string {
  const [year, month, day] = date.split('-').map(Number);
  return new Date(Date.UTC(year ?? 1970, (month ?? 1) - 1, (day ?? 1) + days)).toISOString().slice(0, 10);
}

/** Today's date (`YYYY-MM-DD`) in `timeZone`. */
export function todayIn(timeZone: string): string {
  // en-CA formats dates as YYYY-MM-DD.
  return new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(
    new Date(),
  );
}

/**
 * The `count` days ending on `last`, each with its row or with zero bytes: the API lists only days with
 * usage, and a chart of a fixed span reads better with its quiet days drawn as such.
 */
export function everyDay(rows: readonly UsageRow[], last: string, count: number): UsageRow[] {
  const byDay = new Map(rows.map((row) => [row.start, row]));
  return Array.from({ length: count }, (_, i) => {
    const start = addDays(last, i - count + 1);
    return byDay.get(start) ?? { start, rx_bytes: 0, tx_bytes: 0 };
  });
}

const DAY = new Intl.DateTimeFormat(undefined, { day: 'numeric', month: 'short' });
const MONTH = new Intl.DateTimeFormat(undefined, { month: 'short', year: 'numeric' });

/** A date of the panel's calendar as a local midnight, in seconds (uPlot's time unit). */
function seconds(start: string): number {
  return new Date(`${start}T00:00:00`).getTime() / 1000;
}

function cssColor(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

async function draw(target: HTMLElement, rows: readonly UsageRow[], monthly: boolean): Promise<uPlot> {
  const [{ default: UPlot }] = await Promise.all([import('uplot'), import('uplot/dist/uPlot.min.css')]);
  const label = monthly ? MONTH : DAY;
  const text = cssColor('--text');
  const grid = cssColor('--line');
  const bars = UPlot.paths.bars?.({ size: [0.7, 24], align: 0 });
  const axis = { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
  const times = rows.map((row) => seconds(row.start));
  // Half a bar's slot of room at each end, so the first and last bars are drawn whole.
  const half = (monthly ? 31 : 1) * 43_200;
  const options: uPlot.Options = {
    width: target.clientWidth,
    height: 220,
    legend: { show: false },
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: true, range: (_u, min, max) => [min - half, max + half] } },
    axes: [
      { ...axis, values: (_u, ticks) => ticks.map((tick) => label.format(new Date(tick * 1000))) },
      { ...axis, size: 72, values: (_u, ticks) => ticks.map((tick) => formatBytes(tick)) },
    ],
    // Stacked: the upload bar is drawn over the total, so what shows above it is the download.
    series: [
      {},
      { label: 'Download', fill: cssColor('--chart-rx'), paths: bars, points: { show: false } },
      { label: 'Upload', fill: cssColor('--chart-tx'), paths: bars, points: { show: false } },
    ],
  };
  const data: uPlot.AlignedData = [
    times,
    rows.map((row) => row.rx_bytes + row.tx_bytes),
    rows.map((row) => row.tx_bytes),
  ];
  return new UPlot(options, data, target);
}

export function UsageChart(props: { rows: readonly UsageRow[]; monthly: boolean; caption: string }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const target = box.current;
    if (target === null || props.rows.length === 0) return;
    let chart: uPlot | undefined;
    let gone = false;
    const resize = new ResizeObserver(() => chart?.setSize({ width: target.clientWidth, height: 220 }));
    void draw(target, props.rows, props.monthly).then((made) => {
      if (gone) made.destroy();
      else {
        chart = made;
        resize.observe(target);
      }
    });
    return () => {
      gone = true;
      resize.disconnect();
      chart?.destroy();
    };
  }, [props.rows, props.monthly]);

  if (props.rows.length === 0) return <p>No usage recorded yet.</p>;
  const label = props.monthly ? MONTH : DAY;
  return (
    <figure class="chart">
      <figcaption>
        {props.caption} <span class="key key-rx">Download</span> <span class="key key-tx">Upload</span>
      </figcaption>
      <div ref={box} class="chart-box" aria-hidden="true" />
      <details>
        <summary>Show as a table</summary>
        <Table caption={props.caption} head={[props.monthly ? 'Month' : 'Day', 'Download', 'Upload']}>
          {props.rows.map((row) => (
            <tr key={row.start}>
              <td>{label.format(new Date(`${row.start}T00:00:00`))}</td>
              <td>{formatBytes(row.rx_bytes)}</td>
              <td>{formatBytes(row.tx_bytes)}</td>
            </tr>
          ))}
        </Table>
      </details>
    </figure>
  );
}
