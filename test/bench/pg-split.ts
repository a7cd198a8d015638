/**
 * BENCH_PG_SPLIT=1: where Postgres's time goes, by statement, without pg_stat_statements (which needs a
 * server setting). Every 50 ms it reads pg_stat_activity: each backend of the bench's databases that is
 * running a statement counts one sample to that statement's kind (autovacuum and Postgres's own processes,
 * when not idle, to their own), as working (no wait event: on a core, or ready for one) or waiting (the
 * commit's flush, a lock, a read). What it cannot see is a backend's work between statements (a
 * listening one woken by a notification, say). Samples times the interval give the
 * backends busy on average in each kind, as an active-session sampler does: a diagnostic beside the
 * cores line, which says what Postgres's processes used in all. The sampling itself costs about 0.03 of
 * a core of Postgres and 0.02 of the bench's process (measured on an idle machine), counted in that line.
 */
import pg from 'pg';
import { TEST_PG_ADMIN_URL } from '../helpers/db.ts';

const INTERVAL_MS = 50;

/** A statement's kind, from its text: the ledger's own statements by what they are for, others by their start. */
const KINDS: Array<[RegExp, string]> = [
  [/ledger_claim_and_record/, 'records'],
  [/\bes_append/, 'appends'],
  [/^\s*SELECT global_position\b/, "the log's reads"],
  [/^\s*(COMMIT|BEGIN|ROLLBACK)\s*;?\s*$/i, 'commits'],
  [/\b(INSERT INTO|UPDATE|DELETE FROM) (rm_\w+|chain_\w+|projection_\w+)/, 'read models and chain: $2'],
  [/^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b.*?\b(rm_\w+|chain_\w+)/s, 'read models and chain: $2'],
];

function statementKind(query: string): string {
  for (const [re, name] of KINDS) {
    const m = re.exec(query);
    if (m) return name.replace(/\$(\d)/g, (_, i: string) => m[Number(i)] ?? '');
  }
  return query.replace(/\s+/g, ' ').trim().slice(0, 50) || '(none)';
}

export class PostgresSplit {
  private client: pg.Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Samples a kind was seen working, and waiting (by wait event). */
  private byKind = new Map<string, { working: number; waiting: Map<string, number> }>();
  private samples = 0;
  private busy = false;

  static enabled(): boolean {
    return process.env.BENCH_PG_SPLIT === '1';
  }

  start(): void {
    this.stop();
    this.byKind = new Map();
    this.samples = 0;
    const client = new pg.Client({ connectionString: TEST_PG_ADMIN_URL, application_name: 'bench pg split' });
    this.client = client;
    client.on('error', () => undefined);
    client.connect().then(
      () => {
        if (this.client !== client) return void client.end().catch(() => undefined);
        this.timer = setInterval(() => void this.sample(client), INTERVAL_MS);
      },
      () => undefined,
    );
  }

  private async sample(client: pg.Client): Promise<void> {
    if (this.busy) return; // the last sample is still out: this interval counts nothing
    this.busy = true;
    try {
      // Sessions running a statement (autovacuum's among them), and Postgres's own processes when neither
      // idle nor pausing (the checkpointer between its paced writes).
      const { rows } = await client.query<{ query: string; type: string; wait: string | null }>(
        `SELECT query, backend_type AS type, wait_event_type || ':' || wait_event AS wait FROM pg_stat_activity
         WHERE pid <> pg_backend_pid() AND coalesce(datname, '') <> 'postgres'
           AND CASE WHEN backend_type IN ('client backend', 'autovacuum worker') THEN state = 'active' ELSE coalesce(wait_event_type, '') NOT IN ('Activity', 'Timeout') END`,
      );
      this.samples += 1;
      for (const r of rows) {
        const kind = r.type === 'client backend' ? statementKind(r.query) : r.type;
        let k = this.byKind.get(kind);
        if (!k) this.byKind.set(kind, (k = { working: 0, waiting: new Map() }));
        if (r.wait === null) k.working += 1;
        else k.waiting.set(r.wait, (k.waiting.get(r.wait) ?? 0) + 1);
      }
    } catch {
      // The connection went away (the bench is stopping): the split has what it has.
    } finally {
      this.busy = false;
    }
  }

  /**
   * Since start(), the backends busy on average in each statement kind, the largest first: working, and
   * waiting with its commonest wait event. One line.
   */
  stop(): string {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    void this.client?.end().catch(() => undefined);
    this.client = undefined;
    if (this.samples === 0) return 'postgres by statement: no sample';
    const n = this.samples;
    const rows = [...this.byKind].map(([kind, k]) => {
      const waited = [...k.waiting.values()].reduce((a, b) => a + b, 0);
      const top = [...k.waiting].sort((a, b) => b[1] - a[1])[0];
      return { kind, working: k.working / n, waiting: waited / n, top: top?.[0] };
    });
    const shown = rows.sort((a, b) => b.working + b.waiting - (a.working + a.waiting)).filter((r) => r.working + r.waiting >= 0.005);
    const text = shown.map((r) => `${r.kind} ${r.working.toFixed(2)}${r.waiting >= 0.005 ? ` + ${r.waiting.toFixed(2)} waiting (${r.top})` : ''}`);
    return `postgres by statement, backends busy on average (${n} samples): ${text.join(', ') || 'none'}`;
  }
}
