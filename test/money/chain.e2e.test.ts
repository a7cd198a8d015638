import { execFile } from 'node:child_process';
import { createPrivateKey, createPublicKey, generateKeyPairSync, randomUUID, verify } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson } from '../../shared/canonical.ts';
import { newSignerMemory, signingKey, signNewCheckpoints } from '../../services/chain/checkpoints.ts';
import { CHAIN, chainProjection, type ChainProjection } from '../../services/chain/projection.ts';
import { catchUpChain } from '../../services/chain/archive.ts';
import { parseExposition, total } from '../metrics/exposition.ts';
import { GENESIS, nextLink } from '../../services/chain/link.ts';
import type { HistoryEvent } from '../../services/chain/routes.ts';
import { childEnv, entryArgs } from '../helpers/bundle.ts';
import { OP1, OP2 } from '../helpers/catalog.ts';
import { ADMIN_TOKEN, startInProcess } from '../helpers/service.ts';
import { signedRequest } from '../helpers/signing.ts';
import { startMoneyHarness, type MoneyHarness } from './harness.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const run = promisify(execFile);
const onPostgres = (process.env.TEST_EVENT_STORE ?? 'postgres') === 'postgres';

interface Checkpoint {
  operatorId?: string;
  position: string;
  link: string;
  count: number;
  signedAt: string;
  keyId: string;
  signature: string;
}

/**
 * Contract section 10: a hash chain over the whole history and one per operator, signed checkpoints,
 * verify-chain naming the first break, and an operator's own check with a script that uses nothing of ours.
 */
describe('the tamper-evident history', () => {
  let h: MoneyHarness;
  let keyFile: string;
  const run8 = randomUUID().slice(0, 8);

  /** 'audit': npm run audit (its bundle); otherwise a script of scripts/. */
  const exec = async (file: string, args: string[], env: Record<string, string>) => {
    try {
      const { stdout, stderr } = await run(process.execPath, [...(file === 'audit' ? entryArgs('audit') : [file]), ...args], { cwd: ROOT, env: childEnv(env) });
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };
  const audit = (...args: string[]) =>
    exec('audit', args, { DATABASE_URL: h.env.db.url, EVENT_STORE: h.env.env().EVENT_STORE ?? 'postgres', LOG_LEVEL: 'silent' });
  const operatorScript = (as = OP1, ...extra: string[]) =>
    exec('scripts/verify-history.mjs', ['--url', h.svc.url, '--operator-id', as.id, '--public-key', keyFile, ...extra], { OPERATOR_SECRET: as.secret });
  const adminGet = (p: string) => fetch(`${h.svc.url}${p}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  const caughtUp = () => h.caughtUp(30_000);
  /** Waits until the latest checkpoints cover everything linked (they are signed every second here). */
  const signedUpToDate = () =>
    h.until(async () => {
      const { rows } = await h.svc.ctx.pool.query(
        `SELECT (SELECT max(seq) FROM chain_links) = (SELECT max(seq) FROM chain_checkpoints WHERE chain = '') AS global,
                (SELECT bool_and(c.seq = hd.seq) FROM chain_operator_heads hd LEFT JOIN LATERAL (SELECT max(seq) AS seq FROM chain_checkpoints WHERE chain = hd.operator_id) c ON true) AS operators`,
      );
      return rows[0].global === true && rows[0].operators === true;
    }, 20_000);

  const traffic = async (tag: string) => {
    for (const [as, n] of [[OP1, 3], [OP2, 1]] as const) {
      for (let i = 0; i < n; i++) {
        const player = `ch-${tag}-${as.id}-${i}-${run8}`;
        const token = await h.launch(player, {}, as);
        const base = { sessionToken: token, roundId: `chr-${tag}-${as.id}-${i}-${run8}`, playerRef: player, currency: 'EUR', gameId: 'fruit-1' };
        expect((await h.tx({ ...base, transactionId: `chb-${tag}-${as.id}-${i}-${run8}`, type: 'BET', roundComplete: false, amount: 10 + i })).status).toBe(200);
        expect((await h.tx({ ...base, transactionId: `chw-${tag}-${as.id}-${i}-${run8}`, type: 'WIN', roundComplete: true, amount: 3 })).status).toBe(200);
        if (i === 1) await signedRequest(h.svc.url, { path: '/v1/operator/players/kick', body: { playerRef: player }, as });
      }
    }
    const grant = await signedRequest<{ id: string }>(h.svc.url, {
      path: '/v1/operator/free-spins/grants',
      body: { playerRef: `ch-${tag}-g-${run8}`, idempotencyKey: randomUUID(), gameId: 'fruit-1', spins: 3, currency: 'EUR' },
      as: OP1,
    });
    expect(grant.status).toBe(201);
    await signedRequest(h.svc.url, { path: `/v1/operator/free-spins/grants/${grant.json.id}/cancel`, method: 'POST', as: OP1 });
  };

  beforeAll(async () => {
    h = await startMoneyHarness('chain', { CHAIN_CHECKPOINT_SECONDS: '1' });
    await traffic('a');
    await caughtUp();
    await signedUpToDate();
    const res = await adminGet('/v1/audit/chain/public-key');
    expect(res.status).toBe(200);
    keyFile = path.join(mkdtempSync(path.join(tmpdir(), 'chain-')), 'aggregator.pem');
    writeFileSync(keyFile, await res.text());
  }, 90_000);
  afterAll(async () => h?.close());

  it('links every event once, in log order, each operator its own; verify-chain says it holds', async () => {
    const { rows } = await h.svc.ctx.pool.query('SELECT count(*)::int AS n, max(seq)::int AS top FROM chain_links');
    const events = await h.svc.ctx.eventStore.readAll({ maxCount: 100_000 });
    expect(rows[0]).toEqual({ n: events.length, top: events.length });
    const result = await audit('verify-chain');
    expect(result.code, result.stdout + result.stderr).toBe(0);
    expect(result.stdout).toMatch(new RegExp(`^chain intact: ${events.length} events linked and verified, [1-9]\\d* signed checkpoint\\(s\\) valid, in [\\d.]+ s \\(\\d+ events/s\\)$`, 'm'));
  });

  it('publishes its public key and signed checkpoints; each signature verifies with the key over the documented bytes', async () => {
    const pem = await (await adminGet('/v1/audit/chain/public-key')).text();
    const key = createPublicKey(pem);
    expect(key.asymmetricKeyType).toBe('ed25519');
    const { checkpoints } = (await (await adminGet('/v1/audit/chain/checkpoints')).json()) as { checkpoints: Checkpoint[] };
    expect(checkpoints.length).toBeGreaterThan(0);
    for (const c of checkpoints) {
      expect(c.operatorId).toBeUndefined();
      const body = { position: c.position, link: c.link, count: c.count, signedAt: c.signedAt };
      expect(verify(null, Buffer.from(canonicalJson(body)), key, Buffer.from(c.signature, 'base64')), `checkpoint ${c.count}`).toBe(true);
      // A checkpoint tampered with no longer verifies.
      expect(verify(null, Buffer.from(canonicalJson({ ...body, count: c.count + 1 })), key, Buffer.from(c.signature, 'base64'))).toBe(false);
    }
  });

  it("gives each operator its own events in chain order with their links, recomputable from the first, and none of another's", async () => {
    const mine = (await signedRequest<{ events: HistoryEvent[] }>(h.svc.url, { path: '/v1/operator/history/events?limit=1000', as: OP1 })).json.events;
    expect(mine.length).toBeGreaterThan(10);
    expect(mine.map((e) => e.count)).toEqual(mine.map((_, i) => i + 1));
    let link = GENESIS;
    for (const e of mine) {
      link = nextLink(link, { stream: e.stream, type: e.type, data: e.data, metadata: e.metadata, position: e.position, recordedAt: e.recordedAt });
      expect(link.toString('hex'), `#${e.count}`).toBe(e.link);
    }
    // Rounds, sessions and grants of op-1 only: the grant's later events (no operator in its stream) too.
    expect(new Set(mine.map((e) => e.stream.split('|')[0]))).toEqual(new Set(['player-sessions', 'round', 'grant']));
    expect(mine.filter((e) => e.stream.startsWith('grant|')).map((e) => e.type)).toEqual(expect.arrayContaining(['GrantRequested', 'GrantCancelled']));
    expect(mine.every((e) => !e.stream.includes(`|${OP2.id}|`))).toBe(true);
    const theirs = (await signedRequest<{ events: HistoryEvent[] }>(h.svc.url, { path: '/v1/operator/history/events?limit=1000', as: OP2 })).json.events;
    expect(theirs.length).toBeGreaterThan(0);
    expect(theirs.every((e) => e.stream.includes(`|${OP2.id}|`))).toBe(true);
    // Paging: after=N gives the events after the N-th.
    const page = (await signedRequest<{ events: HistoryEvent[]; next: number }>(h.svc.url, { path: '/v1/operator/history/events?after=5&limit=3', as: OP1 })).json;
    expect(page.events.map((e) => e.count)).toEqual([6, 7, 8]);
    expect(page.next).toBe(8);
    // The operator's checkpoints: its own, each at a link of its chain.
    const cps = (await signedRequest<{ checkpoints: Checkpoint[] }>(h.svc.url, { path: '/v1/operator/history/checkpoints', as: OP1 })).json.checkpoints;
    expect(cps.length).toBeGreaterThan(0);
    for (const c of cps) {
      expect(c.operatorId).toBe(OP1.id);
      expect(mine[c.count - 1]).toMatchObject({ link: c.link, position: c.position });
    }
    const bad = await signedRequest<{ error: string }>(h.svc.url, { path: '/v1/operator/history/events?after=-1', as: OP1 });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatch(/^after: /);
  });

  it('sends a page of large events whole, run after run (never held whole): every event once, in order, links recomputable', async () => {
    // 40 rounds whose wallet replies carry 200 KB each: a page of them spans several of the runs the
    // route reads and writes at a time (HISTORY_READ_RUN).
    const player = `ch-big-${run8}`;
    const token = await h.launch(player);
    const pad = 'Z'.repeat(200_000);
    for (let i = 0; i < 40; i++) {
      const id = `chbig-${run8}-${i}`;
      h.wallet.script(id, { status: 200, body: { status: 'OK', balance: 10_000 - i, pad } });
      const res = await h.tx({ sessionToken: token, roundId: `chbig-${run8}-${i}`, playerRef: player, currency: 'EUR', gameId: 'fruit-1', transactionId: id, type: 'BET', roundComplete: true, amount: 1 });
      expect(res.status).toBe(200);
    }
    // Each outcome is appended behind its answer: wait for the last ones, then for the chain to link them.
    await h.until(async () => (await h.svc.ctx.pool.query(`SELECT count(*)::int AS n FROM rm_transactions WHERE transaction_id LIKE $1 AND status = 'applied'`, [`chbig-${run8}-%`])).rows[0].n === 40);
    await caughtUp();
    const res = await signedRequest<{ events: HistoryEvent[]; next: number }>(h.svc.url, { path: '/v1/operator/history/events?limit=1000', as: OP1 });
    expect(res.status).toBe(200);
    const { events, next } = res.json;
    expect(events.map((e) => e.count)).toEqual(events.map((_, i) => i + 1));
    expect(next).toBe(events.length);
    expect(events.filter((e) => JSON.stringify(e.data).includes(pad)).length).toBe(40);
    let link = GENESIS;
    for (const e of events) link = nextLink(link, { stream: e.stream, type: e.type, data: e.data, metadata: e.metadata, position: e.position, recordedAt: e.recordedAt });
    expect(link.toString('hex')).toBe(events.at(-1)!.link);
    // Past the end: an empty page that names where it stands.
    const after = (await signedRequest<{ events: HistoryEvent[]; next: number }>(h.svc.url, { path: `/v1/operator/history/events?after=${next + 1000}`, as: OP1 })).json;
    expect(after).toEqual({ events: [], next: next + 1000 });
  }, 60_000);

  it("the operator's own script, using nothing of ours, finds its history intact", async () => {
    const result = await operatorScript();
    expect(result.code, result.stdout + result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^history intact: \d+ events recomputed from the first; [1-9]\d* of [1-9]\d* signed checkpoint\(s\) checked against them, the latest at count \d+/m);
    expect((await operatorScript(OP1, '--bogus')).code).toBe(2);
    expect((await exec('scripts/verify-history.mjs', ['--url', h.svc.url, '--operator-id', OP1.id, '--public-key', keyFile], {})).code).toBe(2);
  });

  it('an audit rebuild of the read models leaves the chain as it was', async () => {
    const before = (await h.svc.ctx.pool.query('SELECT seq, link FROM chain_links ORDER BY seq')).rows;
    const rebuilt = await audit('rebuild');
    expect(rebuilt.code, rebuilt.stderr).toBe(0);
    expect((await h.svc.ctx.pool.query('SELECT seq, link FROM chain_links ORDER BY seq')).rows.slice(0, before.length)).toEqual(before);
    expect((await audit('verify-chain')).code).toBe(0);
    expect((await audit('verify-chain', '--projection', 'rounds')).code).toBe(2);
  }, 60_000);

  describe.runIf(onPostgres)('edited directly in the database', () => {
    /** Events in log order with their place in the chain. */
    const logRows = async () =>
      (
        await h.svc.ctx.pool.query<{ global_position: string; transaction_id: string; stream_id: string; event_id: string; data: unknown }>(
          `SELECT global_position::text, transaction_id::text, stream_id, event_id, data FROM es_events e ORDER BY e.transaction_id, e.global_position`,
        )
      ).rows;
    const position = (r: { transaction_id: string; global_position: string }) => `${r.transaction_id}.${r.global_position}`;
    const expectBreakAt = async (count: number, pos: string, what: RegExp) => {
      const result = await audit('verify-chain');
      expect(result.code, result.stdout + result.stderr).toBe(1);
      expect(result.stdout).toMatch(new RegExp(`^chain broken at event #${count} \\(position ${pos.replace('.', '\\.')}`, 'm'));
      expect(result.stdout).toMatch(what);
    };

    it('an edited event: exit 1 naming its position; the operator script finds it too; put back, intact again', async () => {
      const rows = await logRows();
      const i = rows.findIndex((r) => r.stream_id.startsWith(`round|studio-a|${OP1.id}|`));
      const target = rows[i]!;
      await h.svc.ctx.pool.query(`UPDATE es_events SET data = jsonb_set(data, '{request,amount}', '999999') WHERE event_id = $1`, [target.event_id]);
      try {
        await expectBreakAt(i + 1, position(target), /is not the one that was linked here/);
        const script = await operatorScript();
        expect(script.code, script.stdout + script.stderr).toBe(1);
        expect(script.stdout).toMatch(/^history broken: event #\d+ \(position .*, stream round\|/m);
      } finally {
        await h.svc.ctx.pool.query(`UPDATE es_events SET data = $2 WHERE event_id = $1`, [target.event_id, target.data]);
      }
      expect((await audit('verify-chain')).code).toBe(0);
      expect((await operatorScript()).code).toBe(0);
    });

    it('an event whose recorded time is edited to one no date holds (infinity, year 290000): exit 1 naming it, not a crash; the routes and the operator script name it too', async () => {
      const rows = await logRows();
      const i = rows.findIndex((r) => r.stream_id.startsWith(`round|studio-a|${OP1.id}|`));
      const target = rows[i]!;
      const { rows: was } = await h.svc.ctx.pool.query<{ created_at: Date }>('SELECT created_at FROM es_events WHERE event_id = $1', [target.event_id]);
      for (const time of ['infinity', '290000-01-01 00:00:00+00']) {
        await h.svc.ctx.pool.query('UPDATE es_events SET created_at = $2::timestamptz WHERE event_id = $1', [target.event_id, time]);
        try {
          await expectBreakAt(i + 1, position(target), /is not the one that was linked here/);
          const script = await operatorScript();
          expect(script.code, script.stdout + script.stderr).toBe(1);
          expect(script.stdout).toMatch(/^history broken: event #\d+ \(position .*, stream round\|/m);
          const events = await adminGet(`/v1/audit/streams/${encodeURIComponent(target.stream_id)}`);
          expect(events.status).toBe(200);
          const shown = ((await events.json()) as { events: Array<{ id: string; createdAt: string }> }).events.find((e) => e.id === target.event_id);
          expect(shown?.createdAt).toBe('');
        } finally {
          await h.svc.ctx.pool.query('UPDATE es_events SET created_at = $2 WHERE event_id = $1', [target.event_id, was[0]!.created_at]);
        }
      }
      expect((await audit('verify-chain')).code).toBe(0);
      expect((await operatorScript()).code).toBe(0);
    });

    it('a deleted event: exit 1 at its place', async () => {
      const rows = await logRows();
      const i = Math.floor(rows.length / 2);
      const { rows: saved } = await h.svc.ctx.pool.query(`DELETE FROM es_events WHERE global_position = $1 RETURNING *`, [rows[i]!.global_position]);
      try {
        await expectBreakAt(i + 1, position(rows[i + 1]!), /inserted, deleted or moved/);
      } finally {
        const r = saved[0];
        await h.svc.ctx.pool.query(
          `INSERT INTO es_events (global_position, transaction_id, stream_id, revision, event_id, type, data, metadata, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
          [r.global_position, r.transaction_id, r.stream_id, r.revision, r.event_id, r.type, r.data, r.metadata, r.created_at],
        );
      }
      expect((await audit('verify-chain')).code).toBe(0);
    });

    it('an inserted event: exit 1 at its place', async () => {
      const rows = await logRows();
      const i = Math.floor(rows.length / 3);
      // Written with the transaction id of an event already linked: it sorts right after that transaction's events.
      const after = rows.filter((r) => r.transaction_id === rows[i]!.transaction_id).length + rows.findIndex((r) => r.transaction_id === rows[i]!.transaction_id);
      const { rows: inserted } = await h.svc.ctx.pool.query<{ global_position: string }>(
        `INSERT INTO es_events (transaction_id, stream_id, revision, event_id, type, data) VALUES ($1::xid8, 'forged|x', 0, $2, 'TransactionSettled', '{}') RETURNING global_position::text`,
        [rows[i]!.transaction_id, randomUUID()],
      );
      try {
        await expectBreakAt(after + 1, `${rows[i]!.transaction_id}.${inserted[0]!.global_position}`, /inserted, deleted or moved/);
      } finally {
        await h.svc.ctx.pool.query(`DELETE FROM es_events WHERE global_position = $1`, [inserted[0]!.global_position]);
      }
      expect((await audit('verify-chain')).code).toBe(0);
    });

    it('two events reordered: exit 1 at the first of them', async () => {
      const rows = await logRows();
      // Two events of different transactions: swapping their transaction ids swaps their places in the log.
      const a = rows[5]!;
      const b = rows.find((r, k) => k > 5 && r.transaction_id !== a.transaction_id)!;
      await h.svc.ctx.pool.query(`UPDATE es_events SET transaction_id = CASE global_position WHEN $1 THEN $3::xid8 ELSE $4::xid8 END WHERE global_position IN ($1, $2)`, [a.global_position, b.global_position, b.transaction_id, a.transaction_id]);
      try {
        const result = await audit('verify-chain');
        expect(result.code, result.stdout).toBe(1);
        expect(result.stdout).toMatch(/^chain broken at event #(\d+) /m);
        const at = Number(/^chain broken at event #(\d+) /m.exec(result.stdout)![1]);
        expect(at).toBeLessThanOrEqual(rows.indexOf(b) + 1);
        expect(at).toBeGreaterThanOrEqual(6);
      } finally {
        await h.svc.ctx.pool.query(`UPDATE es_events SET transaction_id = CASE global_position WHEN $1 THEN $3::xid8 ELSE $4::xid8 END WHERE global_position IN ($1, $2)`, [a.global_position, b.global_position, a.transaction_id, b.transaction_id]);
      }
      expect((await audit('verify-chain')).code).toBe(0);
    });

    it('two events of one stream swapped (the order a fold follows): exit 1 naming the place', async () => {
      // A round's last two events trade revisions: the log's order and every link stay, the round's story does not.
      const { rows } = await h.svc.ctx.pool.query<{ stream_id: string; revision: string; global_position: string }>(
        `SELECT stream_id, revision::text, global_position::text FROM es_events WHERE stream_id LIKE 'round|%' AND revision = 1 ORDER BY global_position LIMIT 1`,
      );
      const { stream_id: stream } = rows[0]!;
      const swap = async () => {
        await h.svc.ctx.pool.query('BEGIN');
        await h.svc.ctx.pool.query(`UPDATE es_events SET revision = -1 WHERE stream_id = $1 AND revision = 0`, [stream]);
        await h.svc.ctx.pool.query(`UPDATE es_events SET revision = 0 WHERE stream_id = $1 AND revision = 1`, [stream]);
        await h.svc.ctx.pool.query(`UPDATE es_events SET revision = 1 WHERE stream_id = $1 AND revision = -1`, [stream]);
        await h.svc.ctx.pool.query('COMMIT');
      };
      await swap();
      try {
        const result = await audit('verify-chain');
        expect(result.code, result.stdout).toBe(1);
        expect(result.stdout).toMatch(new RegExp(`^chain broken at event #\\d+ \\(position [\\d.]+, stream ${stream.replaceAll('|', '\\|')}\\): the chain linked revision [01] of stream .* here, the history holds revision [01] of .*: events were moved within their stream$`, 'm'));
      } finally {
        await swap();
      }
      expect((await audit('verify-chain')).code).toBe(0);
    });

    /**
     * What database access alone can do: every checkpoint deleted and the chain computed again over the
     * history as it now stands, with a linker of the attacker's own (this code, in this test's process:
     * the running service's runner links nothing after rows it did not write). Returns what it linked.
     */
    const rechain = async (): Promise<ChainProjection> => {
      // One connection of its own for the transaction (the pool's queries may each take another). Its
      // table locks can meet the running service's chain runner in a deadlock, which Postgres ends by
      // failing one of them: then rolled back (never handed back to the pool in a failed transaction,
      // which would fail the next query of whoever takes it) and tried again.
      for (let attempt = 1; ; attempt++) {
        const client = await h.svc.ctx.pool.connect();
        try {
          await client.query('BEGIN');
          await client.query('LOCK TABLE chain_links, chain_operator_heads, chain_grant_owners, chain_checkpoints IN ACCESS EXCLUSIVE MODE');
          for (const t of ['chain_checkpoints', 'chain_operator_heads', 'chain_grant_owners', 'chain_links']) await client.query(`DELETE FROM ${t}`);
          await client.query(`UPDATE projection_checkpoints SET position = 'start' WHERE name = $1`, [CHAIN]);
          await client.query('COMMIT');
          break;
        } catch (err) {
          await client.query('ROLLBACK').catch(() => undefined);
          if ((err as { code?: string }).code !== '40P01' || attempt >= 5) throw err;
        } finally {
          client.release();
        }
      }
      const own = chainProjection(h.svc.ctx.eventStore);
      await catchUpChain(h.svc.ctx.pool, h.svc.ctx.eventStore, own);
      return own;
    };
    /** What a holder of the signing key can do besides: sign the rewritten chain, with a signer of its own (the running service's refuses). */
    const rechainAndResign = async () => {
      const own = await rechain();
      expect((await signNewCheckpoints(h.svc.ctx.pool, await signingKey(h.svc.ctx.pool, undefined), own.heads.linked())).refused).toEqual([]);
      await signedUpToDate();
    };
    /** The service's chain runner: what it linked last, and the failure it records when it refuses to link on. */
    const serviceChain = () => h.svc.runners.find((r) => r.projection.name === CHAIN)!.projection as ChainProjection;
    const chainFailure = async () =>
      (await h.svc.ctx.pool.query<{ failing_error: string | null }>('SELECT failing_error FROM projection_checkpoints WHERE name = $1', [CHAIN])).rows[0]?.failing_error ?? null;

    it('with database access alone, a chain rewritten under the running service and linked again is not signed by it: it refuses, logs and counts it', async () => {
      const refusals = async () =>
        total(parseExposition(await (await adminGet('/metrics')).text()), 'chain_signing_refusals_total', { chain: 'global' });
      const saved = (await h.svc.ctx.pool.query('SELECT * FROM chain_checkpoints')).rows;
      const target = (await logRows()).find((r) => r.stream_id.startsWith(`round|studio-a|${OP1.id}|`))!;
      await h.svc.ctx.pool.query(`UPDATE es_events SET data = jsonb_set(data, '{request,amount}', '1') WHERE event_id = $1`, [target.event_id]);
      try {
        await rechain();
        // Two signing rounds (one a second here) after the chain was linked again, each refusing.
        const linked = await refusals();
        await h.until(async () => (await refusals()) >= linked + 2, 20_000);
        // Neither the global chain nor the edited event's operator's is signed (another operator's chain,
        // untouched, may be).
        expect((await h.svc.ctx.pool.query(`SELECT count(*)::int AS n FROM chain_checkpoints WHERE chain IN ('', $1)`, [OP1.id])).rows[0].n).toBe(0);
      } finally {
        // Put back as it was: the event, the chain (the same links: the same events), and the checkpoints deleted.
        await h.svc.ctx.pool.query(`UPDATE es_events SET data = $2 WHERE event_id = $1`, [target.event_id, target.data]);
        await rechain();
        for (const c of saved) {
          await h.svc.ctx.pool.query('INSERT INTO chain_checkpoints (chain, seq, position, link, signed_at, key_id, signature) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING', [
            c.chain, c.seq, c.position, c.link, c.signed_at, c.key_id, c.signature,
          ]);
        }
      }
      // The chain holds what was signed again: the service signs on.
      await signedUpToDate();
      expect((await audit('verify-chain')).code).toBe(0);
    }, 60_000);

    it('a link row forged past the head is neither signed nor linked after: the runner refuses and names the chain until it is gone', async () => {
      const top = Number((await h.svc.ctx.pool.query<{ seq: string }>('SELECT max(seq) AS seq FROM chain_links')).rows[0]!.seq);
      expect(serviceChain().heads.linked()?.get('')?.seq).toBe(top);
      // The first step of a rewrite: a head of the attacker's making, for the service to sign and link after.
      await h.svc.ctx.pool.query(`INSERT INTO chain_links (seq, position, stream_id, revision, link) VALUES ($1, '0.0', 'forged', 0, decode($2, 'hex'))`, [top + 1, 'cd'.repeat(32)]);
      try {
        await traffic('f');
        await h.until(async () => ((await chainFailure()) ?? '').includes(`the global chain in the database holds at count ${top + 1} a link this process did not write and cannot compute again from the log's event there`), 20_000);
        // Nothing past the real head is linked or signed while the forged row stands.
        expect(Number((await h.svc.ctx.pool.query<{ seq: string }>('SELECT max(seq) AS seq FROM chain_links')).rows[0]!.seq)).toBe(top + 1);
        expect((await h.svc.ctx.pool.query(`SELECT count(*)::int AS n FROM chain_checkpoints WHERE chain = '' AND seq > $1`, [top])).rows[0].n).toBe(0);
        expect(serviceChain().heads.linked()?.get('')?.seq).toBe(top);
      } finally {
        await h.svc.ctx.pool.query('DELETE FROM chain_links WHERE seq = $1', [top + 1]);
      }
      // Gone: the runner links the traffic after its own head, and the signer signs it.
      await caughtUp();
      await signedUpToDate();
      expect(await chainFailure()).toBeNull();
      expect((await audit('verify-chain')).code).toBe(0);
    }, 60_000);

    it('a checkpoint row the signing key did not sign moves no signer\'s memory forward', async () => {
      const key = await signingKey(h.svc.ctx.pool, undefined);
      const memory = newSignerMemory();
      await signNewCheckpoints(h.svc.ctx.pool, key, serviceChain().heads.linked(), memory);
      const held = memory.byChain.get('')!;
      const top = Number((await h.svc.ctx.pool.query<{ seq: string }>('SELECT max(seq) AS seq FROM chain_links')).rows[0]!.seq);
      expect(held.count).toBe(top);
      // A link row past the head and a checkpoint of it, both written with database access alone.
      const forged = 'ab'.repeat(32);
      await h.svc.ctx.pool.query(`INSERT INTO chain_links (seq, position, stream_id, revision, link) VALUES ($1, '0.0', 'forged', 0, decode($2, 'hex'))`, [top + 1, forged]);
      await h.svc.ctx.pool.query(`INSERT INTO chain_checkpoints (chain, seq, position, link, signed_at, key_id, signature) VALUES ('', $1, '0.0', $2, now(), $3, 'eA==')`, [top + 1, forged, key.keyId]);
      try {
        await signNewCheckpoints(h.svc.ctx.pool, key, serviceChain().heads.linked(), memory);
        expect(memory.byChain.get('')).toEqual(held);
      } finally {
        await h.svc.ctx.pool.query(`DELETE FROM chain_checkpoints WHERE chain = '' AND seq = $1`, [top + 1]);
        await h.svc.ctx.pool.query('DELETE FROM chain_links WHERE seq = $1', [top + 1]);
      }
      expect((await audit('verify-chain')).code).toBe(0);
    });

    it('a history rewritten and signed again by the key holder passes verify-chain, but not an operator who kept its checkpoints', async () => {
      const kept = path.join(path.dirname(keyFile), 'kept.json');
      const first = await operatorScript(OP1, '--save', kept);
      expect(first.code, first.stdout + first.stderr).toBe(0);
      const rows = await logRows();
      const target = rows.find((r) => r.stream_id.startsWith(`round|studio-a|${OP1.id}|`))!;
      await h.svc.ctx.pool.query(`UPDATE es_events SET data = jsonb_set(data, '{request,amount}', '1') WHERE event_id = $1`, [target.event_id]);
      try {
        await rechainAndResign();
        // Consistent with itself again: what the chain cannot show alone (docs/auditors.md).
        expect((await audit('verify-chain')).code).toBe(0);
        expect((await operatorScript()).code).toBe(0);
        // The operator who kept its checkpoints sees the rewrite.
        const seen = await operatorScript(OP1, '--kept', kept);
        expect(seen.code, seen.stdout + seen.stderr).toBe(1);
        expect(seen.stdout).toMatch(/^history broken: the checkpoint you kept at count \d+ \(signed .*\) is (served differently now: the history was rewritten and signed again|no longer served)$/m);
      } finally {
        await h.svc.ctx.pool.query(`UPDATE es_events SET data = $2 WHERE event_id = $1`, [target.event_id, target.data]);
        await rechainAndResign();
      }
      expect((await audit('verify-chain')).code).toBe(0);
    }, 60_000);

    it('a checkpoint whose signature or link was changed: exit 1 naming it', async () => {
      const { rows } = await h.svc.ctx.pool.query<{ seq: string; signature: string }>(`SELECT seq::text, signature FROM chain_checkpoints WHERE chain = '' ORDER BY seq LIMIT 1`);
      const cp = rows[0]!;
      const forged = Buffer.from(cp.signature, 'base64');
      forged[0] = forged[0]! ^ 1;
      await h.svc.ctx.pool.query(`UPDATE chain_checkpoints SET signature = $2 WHERE chain = '' AND seq = $1`, [cp.seq, forged.toString('base64')]);
      try {
        const result = await audit('verify-chain');
        expect(result.code).toBe(1);
        expect(result.stdout).toContain(`the signature of the global chain's checkpoint at count ${cp.seq} is not valid`);
        // The events themselves all link: the count says so, not "read before the break".
        expect(result.stdout).toMatch(/^ {2}all \d+ event\(s\) link as recorded; the break is in checkpoint \d+ of those read/m);
        expect(result.stdout).not.toContain('read before the break');
      } finally {
        await h.svc.ctx.pool.query(`UPDATE chain_checkpoints SET signature = $2 WHERE chain = '' AND seq = $1`, [cp.seq, cp.signature]);
      }
      expect((await audit('verify-chain')).code).toBe(0);
    });

    it("a checkpoint deleted from the table: verify-chain does not see it (docs/auditors.md), an operator who kept it does", async () => {
      // A checkpoint of the operator's, and a newer one after more traffic.
      await signedUpToDate();
      await traffic('del');
      await caughtUp();
      await signedUpToDate();
      const kept = path.join(path.dirname(keyFile), 'kept-before-delete.json');
      const first = await operatorScript(OP1, '--save', kept);
      expect(first.code, first.stdout + first.stderr).toBe(0);
      // The operator's oldest checkpoint: newer ones stand, so no signing round signs its count again.
      const { rows } = await h.svc.ctx.pool.query(`SELECT * FROM chain_checkpoints WHERE chain = $1 ORDER BY seq`, [OP1.id]);
      expect(rows.length).toBeGreaterThanOrEqual(2);
      const gone = rows[0];
      await h.svc.ctx.pool.query('DELETE FROM chain_checkpoints WHERE chain = $1 AND seq = $2', [OP1.id, gone.seq]);
      try {
        expect((await audit('verify-chain')).code).toBe(0);
        const seen = await operatorScript(OP1, '--kept', kept);
        expect(seen.code, seen.stdout + seen.stderr).toBe(1);
        expect(seen.stdout).toMatch(new RegExp(`^history broken: the checkpoint you kept at count ${gone.seq} \\(signed .*\\) is no longer served$`, 'm'));
      } finally {
        await h.svc.ctx.pool.query('INSERT INTO chain_checkpoints (chain, seq, position, link, signed_at, key_id, signature) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
          gone.chain, gone.seq, gone.position, gone.link, gone.signed_at, gone.key_id, gone.signature,
        ]);
      }
      expect((await operatorScript(OP1, '--kept', kept)).code).toBe(0);
    }, 60_000);
  });

  it('goes on linking new traffic after all that, with no gap and no link twice', async () => {
    await traffic('b');
    await caughtUp();
    const { rows } = await h.svc.ctx.pool.query('SELECT count(*)::int AS n, max(seq)::int AS top, count(DISTINCT position)::int AS positions FROM chain_links');
    expect(rows[0].n).toBe(rows[0].top);
    expect(rows[0].positions).toBe(rows[0].n);
    await signedUpToDate();
    expect((await audit('verify-chain')).code).toBe(0);
    expect((await operatorScript()).code).toBe(0);
  }, 60_000);

  // On Postgres only: the signing keys and checkpoints are Postgres tables whichever store holds the
  // events, and the service restarted on a new key reads the chain as on any start; the EventStoreDB run
  // keeps to what the store changes (linking its positions, its pages of large events, the rebuild).
  it.runIf(onPostgres)('after a key rotation, new checkpoints carry the new key and old ones still verify; an operator needs both public keys', async () => {
    const oldKeyId = (await adminGet('/v1/audit/chain/public-key')).headers.get('x-key-id')!;
    const oldPrivate = (await h.svc.ctx.pool.query<{ private_key: string }>('SELECT private_key FROM chain_keys WHERE key_id = $1', [oldKeyId])).rows[0]!.private_key;
    const { privateKey } = generateKeyPairSync('ed25519');
    // Every projector process restarts with the new key.
    await h.svc.stop();
    const svc = await startInProcess(h.env, { CHAIN_SIGNING_KEY: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), CHAIN_CHECKPOINT_SECONDS: '1' });
    try {
      const token = (await signedRequest<{ sessionToken: string }>(svc.url, { path: '/v1/operator/games/launch', body: { playerRef: `ch-rot-${run8}`, gameId: 'fruit-1', currency: 'EUR', mode: 'REAL' }, as: OP1 })).json.sessionToken;
      expect(token).toBeTruthy();
      const key = () => fetch(`${svc.url}/v1/audit/chain/public-key`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      await h.until(async () => {
        const k = (await key()).headers.get('x-key-id');
        const { rows } = await svc.ctx.pool.query(`SELECT count(*)::int AS n FROM chain_checkpoints WHERE chain = $1 AND key_id = $2`, [OP1.id, k]);
        return k !== oldKeyId && rows[0].n > 0;
      }, 20_000);
      const newPem = await (await key()).text();
      const oldPem = await (await fetch(`${svc.url}/v1/audit/chain/public-key?keyId=${oldKeyId}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text();
      expect(oldPem).toBe(await (await import('node:fs/promises')).readFile(keyFile, 'utf8'));
      expect(newPem).not.toBe(oldPem);
      const verified = await audit('verify-chain');
      expect(verified.code, verified.stdout).toBe(0);
      // The operator's script with the old key only: the new checkpoints are signed by a key it was not given.
      const newKeyFile = path.join(path.dirname(keyFile), 'rotated.pem');
      writeFileSync(newKeyFile, newPem);
      const oldOnly = await exec('scripts/verify-history.mjs', ['--url', svc.url, '--operator-id', OP1.id, '--public-key', keyFile], { OPERATOR_SECRET: OP1.secret });
      expect(oldOnly.code).toBe(1);
      expect(oldOnly.stdout).toMatch(/is signed with key [0-9a-f]{16}, which is none of the keys you gave/);
      const both = await exec('scripts/verify-history.mjs', ['--url', svc.url, '--operator-id', OP1.id, '--public-key', keyFile, '--public-key', newKeyFile], { OPERATOR_SECRET: OP1.secret });
      expect(both.code, both.stdout + both.stderr).toBe(0);

      // The retired key the service had generated is destroyed; a checkpoint signed with it afterwards
      // (by whoever kept a copy) is refused, though its signature is the key's.
      expect((await svc.ctx.pool.query('SELECT private_key, retired_at FROM chain_keys WHERE key_id = $1', [oldKeyId])).rows[0]).toMatchObject({ private_key: null, retired_at: expect.any(Date) });
      // (Ordered by the column, not by its text: '9' sorts after '25'.)
      const { rows: top } = await svc.ctx.pool.query<{ seq: string; position: string; link: Buffer }>('SELECT l.seq::text AS seq, l.position, l.link FROM chain_links l ORDER BY l.seq DESC LIMIT 1');
      const body = { position: top[0]!.position, link: top[0]!.link.toString('hex'), count: Number(top[0]!.seq) + 0, signedAt: new Date().toISOString() };
      const { signCheckpoint } = await import('../../services/chain/checkpoints.ts');
      const forged = signCheckpoint({ keyId: oldKeyId, privateKey: createPrivateKey(oldPrivate), publicKeyPem: oldPem }, body);
      await svc.ctx.pool.query(
        `INSERT INTO chain_checkpoints (chain, seq, position, link, signed_at, key_id, signature) VALUES ('', $1, $2, $3, $4, $5, $6)
         ON CONFLICT (chain, seq) DO UPDATE SET signed_at = EXCLUDED.signed_at, key_id = EXCLUDED.key_id, signature = EXCLUDED.signature`,
        [
          body.count, body.position, body.link, body.signedAt, oldKeyId, forged.signature,
        ],
      );
      const refused = await audit('verify-chain');
      expect(refused.code, refused.stdout).toBe(1);
      expect(refused.stdout).toContain(`with key ${oldKeyId} after that key was retired`);
      // Dated before the retirement, it is refused all the same: what counts is how far the chain was linked.
      const backdated = signCheckpoint({ keyId: oldKeyId, privateKey: createPrivateKey(oldPrivate), publicKeyPem: oldPem }, { ...body, signedAt: '2020-01-01T00:00:00.000Z' });
      await svc.ctx.pool.query(`UPDATE chain_checkpoints SET signed_at = $2, signature = $3 WHERE chain = '' AND seq = $1`, [body.count, backdated.signedAt, backdated.signature]);
      const stillRefused = await audit('verify-chain');
      expect(stillRefused.code, stillRefused.stdout).toBe(1);
      expect(stillRefused.stdout).toContain(`with key ${oldKeyId} after that key was retired`);
      // The retired key never signs again, and no process may sign with a key of its own beside the configured one.
      await expect(startInProcess(h.env, { ROLES: 'projector', CHAIN_SIGNING_KEY: oldPrivate })).rejects.toThrow(/is key [0-9a-f]{16}, retired at .*: a retired key never signs again/);
      await expect(startInProcess(h.env, { ROLES: 'projector' })).rejects.toThrow(/CHAIN_SIGNING_KEY is unset, but key [0-9a-f]{16} set by CHAIN_SIGNING_KEY signs this chain/);
    } finally {
      await svc.stop();
    }
  }, 60_000);
});
