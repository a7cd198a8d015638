import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OP1 } from '../helpers/catalog.ts';
import { signedRequest } from '../helpers/signing.ts';
import { startMoneyHarness, type MoneyHarness } from './harness.ts';
import { childEnv, entryArgs } from '../helpers/bundle.ts';
import { playerSessionsStream } from '../../services/sessions/events.ts';
import { comparePositions } from '../../shared/eventstore/port.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const run = promisify(execFile);

/** `npm run audit -- <args>` on the harness's own database and store (the esdb test project runs this file on EventStoreDB). */
async function auditOf(h: MoneyHarness, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [...entryArgs('audit'), ...args], {
      cwd: ROOT,
      env: childEnv({ DATABASE_URL: h.env.db.url, EVENT_STORE: h.env.env().EVENT_STORE ?? 'postgres', LOG_LEVEL: 'silent' }),
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('npm run audit -- verify | rebuild', () => {
  let h: MoneyHarness;
  beforeAll(async () => {
    h = await startMoneyHarness('auditverify');
  });
  afterAll(async () => h?.close());

  const audit = (...args: string[]) => auditOf(h, args);

  /** A busy history: rounds with bets, wins, rollbacks, a retried WIN, a decline, kicks and grants. */
  const traffic = async (n: number) => {
    for (let i = 0; i < n; i++) {
      const player = `v-${randomUUID().slice(0, 6)}`;
      const token = await h.launch(player);
      const base = { sessionToken: token, roundId: `vr-${randomUUID()}`, playerRef: player, currency: 'EUR', gameId: 'fruit-1' };
      const bet = `vb-${randomUUID()}`;
      await h.tx({ ...base, transactionId: bet, type: 'BET', roundComplete: false, amount: 10 + i });
      if (i % 3 === 0) await h.tx({ ...base, transactionId: `vrb-${randomUUID()}`, type: 'ROLLBACK', originalTransactionId: bet, amount: 10 + i });
      if (i % 4 === 1) h.wallet.script('*', { status: 500, body: {} });
      await h.tx({ ...base, transactionId: `vw-${randomUUID()}`, type: 'WIN', roundComplete: i % 2 === 0, amount: 5 });
      if (i % 5 === 0) await signedRequest(h.svc.url, { path: '/v1/operator/players/kick', body: { playerRef: player }, as: OP1 });
      if (i % 3 === 1) {
        await signedRequest(h.svc.url, {
          path: '/v1/operator/free-spins/grants',
          body: { playerRef: player, idempotencyKey: randomUUID(), gameId: 'fruit-1', spins: 3, currency: 'EUR' },
          as: OP1,
        });
      }
    }
  };
  const caughtUp = () =>
    h.until(async () => {
      const lags = await Promise.all(h.svc.runners.map((r) => r.lag()));
      const { rows } = await h.svc.ctx.pool.query(`SELECT count(*)::int AS n FROM rm_transactions WHERE status IN ('recorded', 'failed')`);
      return lags.every((l) => l.eventsBehind === 0) && rows[0].n === 0;
    }, 30_000);

  it('passes on a busy history, with the service running and taking traffic', async () => {
    await traffic(15);
    await caughtUp();
    const [result] = await Promise.all([audit('verify'), traffic(5)]);
    const said = `exit ${result.code}\n${result.stdout}${result.stderr}`;
    expect(result.stdout, said).toContain('sessions: matches');
    expect(result.stdout, said).toContain('rounds: matches');
    expect(result.stdout, said).toContain('grants: matches');
    expect(result.code, said).toBe(0);
  }, 120_000);

  it('fails after a read-model row is tampered with, naming the row and the field', async () => {
    await caughtUp();
    // A completed round with no outstanding bet (a completed round may still hold a bet nobody rolled back).
    const { rows } = await h.svc.ctx.pool.query(`SELECT round_stream FROM rm_rounds WHERE status = 'completed' AND outstanding_bets = 0 LIMIT 1`);
    const stream = rows[0].round_stream as string;
    await h.svc.ctx.pool.query(`UPDATE rm_rounds SET outstanding_bets = 42 WHERE round_stream = $1`, [stream]);
    const { rows: grants } = await h.svc.ctx.pool.query(`SELECT id FROM rm_grants LIMIT 1`);
    await h.svc.ctx.pool.query(`DELETE FROM rm_grants WHERE id = $1`, [grants[0].id]);
    // What an operator reconciles against: a transaction shown as applied that the wallet declined, and a statement's sum.
    const { rows: txs } = await h.svc.ctx.pool.query(`SELECT round_stream, transaction_id FROM rm_transactions WHERE operator_status = 'applied' LIMIT 1`);
    await h.svc.ctx.pool.query(`UPDATE rm_transactions SET operator_status = 'declined' WHERE round_stream = $1 AND transaction_id = $2`, [txs[0].round_stream, txs[0].transaction_id]);
    await h.svc.ctx.pool.query(`UPDATE rm_settlement_quarters SET amount = amount + 1 WHERE ctid = (SELECT ctid FROM rm_settlement_quarters LIMIT 1)`);
    const result = await audit('verify');
    expect(result.code).toBe(1);
    expect(result.stdout).toContain(`rm_rounds round_stream=${stream}: outstanding_bets live=42 rebuilt=0`);
    expect(result.stdout).toContain(`rm_grants id=${grants[0].id}: missing from the live read model`);
    expect(result.stdout).toContain(`rm_transactions round_stream=${txs[0].round_stream} transaction_id=${txs[0].transaction_id}: operator_status live="declined" rebuilt="applied"`);
    expect(result.stdout).toMatch(/rm_settlement_quarters .*amount live=/);
    expect(result.stdout).toContain('sessions: matches');
  }, 120_000);

  it('rebuilds the live read models while the service runs; verify then passes and projection carries on', async () => {
    // The live tables' keys and indexes are dropped and built again around the swap: the same ones must come back.
    const indexes = async () => [
      ...(await h.svc.ctx.pool.query(`SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename LIKE 'rm\\_%' ORDER BY 1, 2`)).rows,
      ...(
        await h.svc.ctx.pool.query(
          `SELECT conrelid::regclass::text AS tablename, conname, contype, pg_get_constraintdef(oid) AS definition FROM pg_constraint
           WHERE connamespace = 'public'::regnamespace AND conrelid::regclass::text LIKE 'rm\\_%' ORDER BY 1, 2`,
        )
      ).rows,
    ];
    const before = await indexes();
    expect(before.length).toBeGreaterThan(10);
    expect(before.filter((r) => r.contype === 'p').length).toBeGreaterThanOrEqual(6); // every read-model table's key
    const [rebuilt] = await Promise.all([audit('rebuild'), traffic(4)]);
    expect(rebuilt.code).toBe(0);
    expect(await indexes()).toEqual(before);
    expect(rebuilt.stdout).toContain('rounds: rebuilt from the history');
    // How long reads of the live read models waited, for whoever runs it while the service runs.
    const locked = /^the live read models were locked for (\d+\.\d) s while the rebuild was swapped in \(their reads waited meanwhile\)$/m.exec(rebuilt.stdout);
    expect(locked, rebuilt.stdout).not.toBeNull();
    expect(Number(locked![1])).toBeLessThan(30);
    await traffic(2);
    await caughtUp();
    const verified = await audit('verify');
    expect(verified.stdout).not.toContain('differ');
    expect(verified.code).toBe(0);
  }, 120_000);

  it('rebuilds by copying, and says why, when something is attached to a live table itself; the attachment stays', async () => {
    await h.svc.ctx.pool.query('GRANT SELECT ON rm_rounds TO PUBLIC');
    try {
      const rebuilt = await audit('rebuild');
      expect(rebuilt.code, rebuilt.stderr).toBe(0);
      expect(rebuilt.stdout).toContain('the rebuilt rows were copied into the live tables under the lock, as something is attached to the tables themselves that a swap by name would lose:\n  rm_rounds: privileges granted on it\n');
      expect(rebuilt.stdout).toMatch(/^the live read models were locked for \d+\.\d s/m);
      const { rows } = await h.svc.ctx.pool.query(`SELECT has_table_privilege('public', 'rm_rounds', 'SELECT') AS granted`);
      expect(rows[0].granted).toBe(true);
    } finally {
      await h.svc.ctx.pool.query('REVOKE SELECT ON rm_rounds FROM PUBLIC');
    }
    // Without it, the swap is by name again, and says nothing of copies.
    const rebuilt = await audit('rebuild');
    expect(rebuilt.code).toBe(0);
    expect(rebuilt.stdout).not.toContain('copied');
  }, 120_000);

  it('drops a scratch schema left by an interrupted rebuild, and says so', async () => {
    // As a rebuild killed after its replay leaves it: a schema of tables, whose lock died with its run.
    await h.svc.ctx.pool.query(
      `CREATE SCHEMA audit_00c0ffee00; COMMENT ON SCHEMA audit_00c0ffee00 IS 'scratch tables of npm run audit (rebuild or verify), dropped when it ends';
       CREATE TABLE audit_00c0ffee00.rm_rounds AS SELECT g AS x FROM generate_series(1, 100000) g`,
    );
    try {
      const verified = await audit('verify', '--projection', 'grants');
      expect(verified.code).toBe(0);
      expect(verified.stderr).toMatch(/^dropped scratch schema audit_00c0ffee00 \([1-9]\d* MB\), left by a rebuild or verify that was interrupted$/m);
      expect((await h.svc.ctx.pool.query(`SELECT 1 FROM pg_namespace WHERE nspname = 'audit_00c0ffee00'`)).rows).toEqual([]);
    } finally {
      await h.svc.ctx.pool.query('DROP SCHEMA IF EXISTS audit_00c0ffee00 CASCADE');
    }
  }, 120_000);

  it('refuses an unknown command or projection with exit code 2', async () => {
    expect((await audit('explode')).code).toBe(2);
    expect((await audit('verify', '--projection', 'nope')).code).toBe(2);
  });

  it('takes the name of the reconciliation read model for the rounds one, which keeps its tables now', async () => {
    await caughtUp();
    const verified = await audit('verify', '--projection', 'reconciliation');
    expect(verified.stderr).toContain('the reconciliation read model is kept by the rounds read model now: verify --projection rounds');
    expect(verified.stdout).toContain('rounds: matches a rebuild from the history');
    expect(verified.code).toBe(0);
  });
});

describe('npm run audit -- verify on a history its read models have not applied', () => {
  let h: MoneyHarness;
  beforeAll(async () => {
    // The api alone: what it records, no projector applies.
    h = await startMoneyHarness('auditunapplied', { ROLES: 'api' });
  });
  afterAll(async () => h?.close());

  const audit = (...args: string[]) => auditOf(h, args);
  /**
   * Launches `n` sessions and waits until the log reads their events: a transaction left open anywhere on
   * the server (another test file's) holds the log's head back a moment (ADR 3).
   */
  const launched = async (n: number) => {
    const positions: string[] = [];
    for (let i = 0; i < n; i++) {
      const player = `unapplied-${randomUUID().slice(0, 8)}`;
      await h.launch(player);
      positions.push((await h.svc.ctx.eventStore.readStream(playerSessionsStream('op-1', player))).at(-1)!.position);
    }
    await h.until(async () => {
      const head = await h.svc.ctx.eventStore.headPosition();
      return positions.every((p) => comparePositions(head, p) >= 0);
    });
  };

  it('says it verified nothing and exits 2 while a read model has applied no event; once rebuilt, it names the newer events it did not verify', async () => {
    await launched(3);
    // A row in tables no projector has written is a difference all the same: exit 1, named.
    await h.svc.ctx.pool.query(`INSERT INTO rm_sessions (token, revoked_at) VALUES ('forged-token', now())`);
    const forged = await audit('verify', '--projection', 'sessions');
    expect([forged.code, forged.stdout], forged.stderr).toEqual([1, expect.stringContaining('forged-token')]);
    expect(forged.stdout).not.toContain('nothing verified');
    await h.svc.ctx.pool.query(`DELETE FROM rm_sessions WHERE token = 'forged-token'`);
    const before = await audit('verify', '--projection', 'sessions');
    const said = `exit ${before.code}\n${before.stdout}${before.stderr}`;
    expect(before.stdout, said).toContain('sessions: nothing verified: the read model has applied no event of the history yet');
    expect(before.stdout, said).not.toContain('matches');
    expect(before.stderr, said).toContain('nothing verified for sessions');
    expect(before.code, said).toBe(2);

    // A rebuild applies the history; what is recorded after it waits for a projector that does not run.
    expect((await audit('rebuild', '--projection', 'sessions')).code).toBe(0);
    await launched(2);
    const after = await audit('verify', '--projection', 'sessions');
    const saidAfter = `exit ${after.code}\n${after.stdout}${after.stderr}`;
    expect(after.stdout, saidAfter).toContain('sessions: matches a rebuild from the history');
    expect(after.stdout, saidAfter).toMatch(/^ {2}2 newer event\(s\) after the position verified \(the projector role applies them as they come\): not verified$/m);
    expect(after.code, saidAfter).toBe(0);
  }, 120_000);

  it('rebuild names the event a read model cannot apply (the history changed by hand), without a stack trace; nothing swapped in', async () => {
    await launched(1);
    const stream = playerSessionsStream('op-1', `forged-${randomUUID().slice(0, 6)}`);
    // What no launch writes: a SessionStarted without its facts.
    await h.svc.ctx.eventStore.append(stream, [{ id: randomUUID(), type: 'SessionStarted', data: {} }], 'no_stream');
    const [forged] = await h.svc.ctx.eventStore.readStream(stream);
    // Readable in the log once no transaction older than it is still open anywhere on the server (ADR 3).
    await h.until(async () => comparePositions(await h.svc.ctx.eventStore.headPosition(), forged!.position) >= 0);
    const result = await audit('rebuild', '--projection', 'sessions');
    const said = `exit ${result.code}\n${result.stdout}${result.stderr}`;
    expect(result.stdout, said).toContain(`the sessions read model could not apply the event at position ${forged!.position} (stream ${stream}, revision 0, SessionStarted): `);
    expect(result.stdout, said).toContain('Nothing was swapped in; see whether the history was changed (npm run audit -- verify-chain)');
    expect(result.stdout + result.stderr, said).not.toMatch(/^\s+at /m);
    expect(result.code, said).toBe(1);
  }, 120_000);
});
