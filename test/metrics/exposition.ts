/**
 * A parser of the Prometheus text exposition format (version 0.0.4), strict enough that a malformed
 * line fails the test: `# HELP` / `# TYPE` lines, and samples `name{label="value",...} value [timestamp]`
 * with label values escaped as \\, \" and \n. prom-client has no parser of its own.
 */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  /** Metric family name → its declared type (counter, gauge, histogram, summary, untyped). */
  types: Map<string, string>;
  help: Map<string, string>;
  samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;

/** As Prometheus reads it (Go's ParseFloat): NaN and Inf in any case; prom-client writes `Nan`. */
function parseValue(raw: string, line: string): number {
  const special = /^([+-]?)(inf|infinity|nan)$/i.exec(raw);
  if (special) return special[2]!.toLowerCase() === 'nan' ? NaN : special[1] === '-' ? -Infinity : Infinity;
  const n = Number(raw);
  if (raw === '' || Number.isNaN(n)) throw new Error(`bad sample value in: ${line}`);
  return n;
}

function parseSample(line: string): Sample {
  const name = NAME.exec(line)?.[0];
  if (!name) throw new Error(`bad metric name in: ${line}`);
  let i = name.length;
  const labels: Record<string, string> = {};
  if (line[i] === '{') {
    i++;
    while (line[i] !== '}') {
      const labelName = LABEL_NAME.exec(line.slice(i))?.[0];
      if (!labelName || line[i + labelName.length] !== '=' || line[i + labelName.length + 1] !== '"') throw new Error(`bad label in: ${line}`);
      i += labelName.length + 2;
      let value = '';
      for (;;) {
        const c = line[i++];
        if (c === undefined) throw new Error(`unterminated label value in: ${line}`);
        if (c === '"') break;
        if (c === '\\') {
          const e = line[i++];
          if (e === 'n') value += '\n';
          else if (e === '\\' || e === '"') value += e;
          else throw new Error(`bad escape in: ${line}`);
        } else value += c;
      }
      if (labelName in labels) throw new Error(`duplicate label ${labelName} in: ${line}`);
      labels[labelName] = value;
      if (line[i] === ',') i++;
      else if (line[i] !== '}') throw new Error(`expected , or } in: ${line}`);
    }
    i++;
  }
  if (line[i] !== ' ') throw new Error(`expected a space before the value in: ${line}`);
  const [value, timestamp, ...rest] = line.slice(i + 1).split(' ');
  if (rest.length > 0 || (timestamp !== undefined && !/^-?\d+$/.test(timestamp))) throw new Error(`bad sample in: ${line}`);
  return { name, labels, value: parseValue(value ?? '', line) };
}

/** The family a sample belongs to: histogram and summary samples carry a suffix. */
function familyOf(name: string, types: Map<string, string>): string | undefined {
  if (types.has(name)) return name;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (name.endsWith(suffix)) {
      const base = name.slice(0, -suffix.length);
      const t = types.get(base);
      if (t === 'histogram' || t === 'summary') return base;
    }
  }
  return undefined;
}

export function parseExposition(text: string): Exposition {
  const types = new Map<string, string>();
  const help = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) ?(.*)$/.exec(line);
      if (!m) continue; // a plain comment
      if (m[1] === 'TYPE') {
        if (!['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(m[3]!)) throw new Error(`bad type in: ${line}`);
        if (types.has(m[2]!)) throw new Error(`type declared twice: ${line}`);
        types.set(m[2]!, m[3]!);
      } else help.set(m[2]!, m[3]!);
      continue;
    }
    const s = parseSample(line);
    if (!familyOf(s.name, types)) throw new Error(`sample of an undeclared family: ${line}`);
    samples.push(s);
  }
  return { types, help, samples };
}

const matches = (s: Sample, name: string, labels: Record<string, string>) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v);

/** Sum of the samples named `name` whose labels include `labels` (0 when there is none). */
export function total(e: Exposition, name: string, labels: Record<string, string> = {}): number {
  return e.samples.filter((s) => matches(s, name, labels)).reduce((a, s) => a + s.value, 0);
}

/** The samples named `name` whose labels include `labels`. */
export function samplesOf(e: Exposition, name: string, labels: Record<string, string> = {}): Sample[] {
  return e.samples.filter((s) => matches(s, name, labels));
}
