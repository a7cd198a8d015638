import { UNACKNOWLEDGED } from '../rounds/decider.ts';
import type { SettlementCell } from './queries.ts';

/**
 * The settlement statement (contract section 9) from the interval's summed cells. Sums are exact
 * integers however large (bigint; written into JSON as integers, never rounded).
 */

export interface Figure {
  count: bigint;
  amountMinor: bigint;
}
interface LineFigures {
  bets: Figure;
  wins: Figure;
  refunds: Figure;
  ggrMinor: bigint;
}
export interface StatementLine extends LineFigures {
  providerId: string;
  gameId: string;
  currency: string;
}
export interface Statement {
  from: string;
  to: string;
  lines: StatementLine[];
  adjustments: Record<string, { credits: Figure; debits: Figure }>;
  unsettled: Record<string, { pending: Figure; failed: Figure; dead: Figure }>;
  totals: Record<string, LineFigures>;
}

const zero = (): Figure => ({ count: 0n, amountMinor: 0n });
const add = (f: Figure, c: Pick<SettlementCell, 'count' | 'amount'>) => {
  f.count += c.count;
  f.amountMinor += c.amount;
};
const emptyLine = (): LineFigures => ({ bets: zero(), wins: zero(), refunds: zero(), ggrMinor: 0n });
const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
/** An object with its keys in text order: the same statement always reads the same. */
const sortedRecord = <T>(m: Map<string, T>): Record<string, T> => Object.fromEntries([...m.entries()].sort(([a], [b]) => byText(a, b)));

/**
 * Lines per (provider, game, currency) over applied BETs (bets), WINs (wins) and ROLLBACKs (refunds,
 * the reconciler's included); applied ADJUSTMENTs per currency and direction; every transaction the
 * wallet has not acknowledged (pending, failed, dead) per currency, whatever its type; totals per
 * currency over the lines. Declined and voided transactions moved no money and count nowhere.
 */
export function buildStatement(from: string, to: string, cells: SettlementCell[]): Statement {
  const lines = new Map<string, StatementLine>();
  const adjustments = new Map<string, { credits: Figure; debits: Figure }>();
  const unsettled = new Map<string, { pending: Figure; failed: Figure; dead: Figure }>();
  for (const c of cells) {
    if (c.status === 'applied') {
      if (c.type === 'ADJUSTMENT') {
        const a = adjustments.get(c.currency) ?? { credits: zero(), debits: zero() };
        add(c.direction === 'DEBIT' ? a.debits : a.credits, c);
        adjustments.set(c.currency, a);
        continue;
      }
      const key = JSON.stringify([c.providerId, c.gameId, c.currency]);
      const line = lines.get(key) ?? { providerId: c.providerId, gameId: c.gameId, currency: c.currency, ...emptyLine() };
      add(c.type === 'BET' ? line.bets : c.type === 'WIN' ? line.wins : line.refunds, c);
      lines.set(key, line);
    } else if ((UNACKNOWLEDGED as readonly string[]).includes(c.status)) {
      const u = unsettled.get(c.currency) ?? { pending: zero(), failed: zero(), dead: zero() };
      add(u[c.status as 'pending' | 'failed' | 'dead'], c);
      unsettled.set(c.currency, u);
    }
  }
  const totals = new Map<string, LineFigures>();
  const sorted = [...lines.values()].sort((a, b) => byText(a.providerId, b.providerId) || byText(a.gameId, b.gameId) || byText(a.currency, b.currency));
  for (const line of sorted) {
    line.ggrMinor = line.bets.amountMinor - line.wins.amountMinor - line.refunds.amountMinor;
    const t = totals.get(line.currency) ?? emptyLine();
    add(t.bets, { count: line.bets.count, amount: line.bets.amountMinor });
    add(t.wins, { count: line.wins.count, amount: line.wins.amountMinor });
    add(t.refunds, { count: line.refunds.count, amount: line.refunds.amountMinor });
    t.ggrMinor += line.ggrMinor;
    totals.set(line.currency, t);
  }
  return { from, to, lines: sorted, adjustments: sortedRecord(adjustments), unsettled: sortedRecord(unsettled), totals: sortedRecord(totals) };
}

/** JSON with every bigint written as an exact integer. */
const CSV_HEADER = ['providerId', 'gameId', 'currency', 'betCount', 'betAmountMinor', 'winCount', 'winAmountMinor', 'refundCount', 'refundAmountMinor', 'ggrMinor'];

/** A CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break. */
const field = (v: string): string => (/[",\r\n]/.test(v) ? `"${v.replaceAll('"', '""')}"` : v);

/** The statement's lines as CSV (RFC 4180, CRLF line ends), with a header row. */
export function statementCsv(statement: Statement): string {
  const rows = statement.lines.map((l) =>
    [l.providerId, l.gameId, l.currency, l.bets.count, l.bets.amountMinor, l.wins.count, l.wins.amountMinor, l.refunds.count, l.refunds.amountMinor, l.ggrMinor]
      .map((v) => field(String(v)))
      .join(','),
  );
  return [CSV_HEADER.join(','), ...rows].map((r) => `${r}\r\n`).join('');
}
