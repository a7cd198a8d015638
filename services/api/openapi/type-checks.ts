import type { z } from 'zod';
import type { ProjectionLag } from '../../../projections/runner.ts';
import type { Grant } from '../../grants/decider.ts';
import type { TxStatus } from '../../rounds/decider.ts';
import type { Origin, TransactionRequest } from '../../rounds/events.ts';
import type { GameSummary } from '../../sessions/routes.ts';
import type { gameSummarySchema } from '../../sessions/schemas.ts';
import type { grantSchema } from '../../grants/schemas.ts';
import type { walletTransactionRequest } from '../../rounds/schemas.ts';
import type { adjustmentResponse, projectionsResponse, roundState } from '../schemas.ts';
import type { RoundRecord } from '../../reconciliation/queries.ts';
import type { roundDetails, settlementStatement } from '../../reconciliation/schemas.ts';
import type { Statement, StatementLine } from '../../reconciliation/statement.ts';

// Compile-time ties between the documented schemas and the types the code builds responses and
// outbound bodies from: a field added to one side only fails `npm run typecheck`.

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const same = <A, B>(ok: Same<A, B>): Same<A, B> => ok;

export const schemaTypeChecks = [
  same<z.infer<typeof grantSchema>, Grant>(true),
  same<z.infer<typeof gameSummarySchema>, GameSummary>(true),
  same<z.infer<typeof walletTransactionRequest>, TransactionRequest>(true),
  same<z.infer<typeof projectionsResponse>['projections'][number], ProjectionLag>(true),
  same<z.infer<typeof adjustmentResponse>['status'], TxStatus>(true),
  same<z.infer<typeof roundState>['transactions'][number]['status'], TxStatus>(true),
  same<z.infer<typeof roundState>['transactions'][number]['origin'], Origin>(true),
  // The statement is built with bigint sums: its fields, not their types, are what can drift apart.
  same<keyof z.infer<typeof settlementStatement>, keyof Statement>(true),
  same<keyof z.infer<typeof settlementStatement>['lines'][number], keyof StatementLine>(true),
  same<z.infer<typeof roundDetails>['status'], RoundRecord['status']>(true),
] as const;
