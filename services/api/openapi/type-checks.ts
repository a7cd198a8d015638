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
] as const;
