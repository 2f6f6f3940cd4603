/**
 * The Prometheus text format 0.0.4, written by hand for the daemon's and the broker's metrics: a scrape
 * is one string built from numbers each keeps anyway (see src/agent/daemon/metrics.ts for the measure).
 */

/** The Content-Type of the text format. */
export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export type Labels = Readonly<Record<string, string>>;
export interface Family {
  name: string;
  type: 'counter' | 'gauge';
  help: string;
  samples: readonly (readonly [Labels, number])[];
}

export function renderMetrics(families: readonly Family[]): string {
  const lines: string[] = [];
  for (const f of families) {
    lines.push(`# HELP ${f.name} ${f.help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`, `# TYPE ${f.name} ${f.type}`);
    for (const [labels, value] of f.samples) lines.push(`${f.name}${labelText(labels)} ${numberText(value)}`);
  }
  return `${lines.join('\n')}\n`;
}

function labelText(labels: Labels): string {
  const pairs = Object.entries(labels).map(([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`);
  return pairs.length === 0 ? '' : `{${pairs.join(',')}}`;
}

function numberText(n: number): string {
  if (Number.isNaN(n)) return 'NaN';
  if (n === Number.POSITIVE_INFINITY) return '+Inf';
  if (n === Number.NEGATIVE_INFINITY) return '-Inf';
  return String(n);
}
