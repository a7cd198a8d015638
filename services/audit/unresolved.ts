import type { Pool } from 'pg';
import { DEAD_STATUSES, isUnsettled, UNSETTLED_STATUSES, type TxStatus } from '../rounds/decider.ts';
import type { TransactionType } from '../rounds/events.ts';
import { transactionsIn, type TransactionKey } from '../rounds/queries.ts';
import { badRequest } from '../../shared/errors.ts';
import { isStorableText } from '../../shared/http/body.ts';
import { notOurCursor, type Cursors } from '../../shared/http/cursor.ts';

/** The lists of GET /v1/audit/transactions. */
export const UNRESOLVED_LISTS = ['dead', 'unsettled', 'unresolved'] as const;
export type UnresolvedList = (typeof UNRESOLVED_LISTS)[number];

const STATUSES: Record<UnresolvedList, readonly TxStatus[]> = {
  dead: DEAD_STATUSES,
  unsettled: UNSETTLED_STATUSES,
  unresolved: [...DEAD_STATUSES, ...UNSETTLED_STATUSES],
};

/**
 * The cursor: the list it belongs to and the key of the last row read. Opaque to callers, and signed
 * (shared/http/cursor.ts); a decoded key is checked too for what Postgres would refuse (a time it cannot
 * read, text it cannot hold), for a cursor given before a change of its form.
 */
export function encodeTxCursor(cursors: Cursors, list: UnresolvedList, key: TransactionKey): string {
  return cursors.encode({ v: 1, l: list, k: [key.recordedAt, key.roundStream, key.transactionId] });
}

/** `recorded_at::text` as Postgres writes a timestamptz in ISO style: date, time with up to 6 fractional digits, offset. */
const PG_INSTANT = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?[+-]\d{2}(:\d{2}(:\d{2})?)?$/;
/** A key's text: what Postgres can hold (a lone surrogate would arrive as U+FFFD and sort elsewhere). */
const storable = (v: unknown): v is string => typeof v === 'string' && v.length > 0 && v.length <= 4096 && isStorableText(v);

export function decodeTxCursor(cursors: Cursors, cursor: string, list: UnresolvedList): TransactionKey {
  const c = cursors.decode(cursor);
  const k = Array.isArray(c.k) && c.k.length === 3 ? (c.k as unknown[]) : undefined;
  if (c.v !== 1 || typeof c.l !== 'string' || !k || typeof k[0] !== 'string' || !PG_INSTANT.test(k[0]) || !storable(k[1]) || !storable(k[2])) throw notOurCursor();
  if (c.l !== list) throw badRequest(`cursor: it belongs to status=${UNRESOLVED_LISTS.includes(c.l as UnresolvedList) ? c.l : 'another list'} (keep status as it was)`);
  return { recordedAt: k[0], roundStream: k[1], transactionId: k[2] };
}

const READ_BATCH = 200;

/**
 * One page of a list, oldest first: up to `limit` transactions after `after`, and the key to read on from
 * (undefined when the list has no more). Rows are read by key and kept by the decider's rule: a dead one
 * always; an unsettled one unless a ROLLBACK settled it for good (isUnsettled). A row left out still moves
 * the page on, so a page holds `limit` rows whenever the list has that many more; the rows past a full page
 * are read until one it lists, so the last page says it is the last.
 */
export async function unresolvedPage(
  pool: Pool,
  list: UnresolvedList,
  limit: number,
  after: TransactionKey | undefined,
): Promise<{ rows: Array<Record<string, unknown>>; next: TransactionKey | undefined }> {
  const rows: Array<Record<string, unknown>> = [];
  let at = after;
  for (;;) {
    const need = limit - rows.length;
    // Rows the rule leaves out (failed BETs rolled back, kept for good) may be many: read in batches of
    // at least READ_BATCH, so a small page over them is a few queries, not one for each.
    const batch = await transactionsIn(pool, STATUSES[list], { after: at, limit: Math.max(need + 1, READ_BATCH) }).catch((err: unknown) => {
      // A cursor's time shaped as Postgres writes one but no instant (month 13, year 0): Postgres refuses it (SQLSTATE class 22, data exception).
      if (at === after && after !== undefined && typeof (err as { code?: unknown }).code === 'string' && (err as { code: string }).code.startsWith('22')) throw notOurCursor();
      throw err;
    });
    let read = 0;
    for (; read < batch.length && rows.length < limit; read++) {
      const { row, rolledBack, key } = batch[read]!;
      if (listed(row, rolledBack)) rows.push(row);
      at = key;
    }
    // The page is full and the list goes on: a row it lists is still to come (rows it leaves out are passed over).
    if (batch.slice(read).some((t) => listed(t.row, t.rolledBack))) return { rows, next: at };
    if (batch.length < Math.max(need + 1, READ_BATCH)) return { rows, next: undefined }; // the list ended inside this batch
    if (read < batch.length) at = batch.at(-1)!.key; // only rows it leaves out after the page: read on past them
  }
}

/** The decider's rule for the lists: a dead one always; an unsettled one unless a ROLLBACK settled it for good. */
const listed = (row: { type: TransactionType; status: TxStatus }, rolledBack: boolean): boolean => DEAD_STATUSES.includes(row.status) || isUnsettled(row.type, row.status, rolledBack);
