import type { Pool, PoolClient } from '../../shared/db/pool.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';
import { grantRequestOperator, isGrantStream } from '../grants/events.ts';
import { roundStreamOperator } from '../rounds/events.ts';
import { sessionsStreamOperator } from '../sessions/events.ts';

/**
 * The operator an event belongs to, for its chain (contract section 10: the events of that operator's
 * streams: rounds and adjustments, player sessions, grants). A round's or a session stream's name says
 * it; a grant's stream does not, so its first event does, and the owner of its later events is what
 * `grantOwner` remembers of that first one. Events of no operator are in the global chain only.
 */
export type Owner = { operatorId: string; remember?: 'grant-stream' } | undefined;

export function ownerOf(e: Pick<RecordedEvent, 'streamId' | 'type' | 'data'>, grantOwner: (streamId: string) => string | undefined): Owner {
  const fromName = roundStreamOperator(e.streamId) ?? sessionsStreamOperator(e.streamId);
  if (fromName !== undefined) return { operatorId: fromName };
  if (!isGrantStream(e.streamId)) return undefined;
  const requested = grantRequestOperator(e.type, e.data);
  if (requested !== undefined) return { operatorId: requested, remember: 'grant-stream' };
  const known = grantOwner(e.streamId);
  return known !== undefined ? { operatorId: known } : undefined;
}

/** Whose grants the events' grant streams are, as the chain remembered it from each grant's first event. */
export async function knownGrantOwners(db: Pool | PoolClient, events: Array<Pick<RecordedEvent, 'streamId'>>): Promise<Map<string, string>> {
  const streams = [...new Set(events.filter((e) => isGrantStream(e.streamId)).map((e) => e.streamId))];
  const owners = new Map<string, string>();
  if (streams.length === 0) return owners;
  const { rows } = await db.query<{ stream_id: string; operator_id: string }>('SELECT stream_id, operator_id FROM chain_grant_owners WHERE stream_id = ANY($1::text[])', [streams]);
  for (const r of rows) owners.set(r.stream_id, r.operator_id);
  return owners;
}
