import { createHash } from 'node:crypto';
import { canonicalJson } from '../../shared/canonical.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';

/**
 * The hash chain (contract section 10). Each event's link is
 *
 *   link(n) = SHA-256( link(n-1) as 32 bytes  ||  UTF-8 bytes of canonical(event n) )
 *
 * with link(0), before the first event, 32 zero bytes. canonical(event) is the JSON text of the object
 * {stream, type, data, metadata, position, recordedAt} with the keys of every object at every level in
 * ascending order of their UTF-16 code units, no whitespace, strings and numbers as JSON.stringify
 * writes them (see shared/canonical.ts); `position` is the event's log position as the store gives it
 * and `recordedAt` the store's time of the append as an ISO 8601 UTC string with milliseconds. The
 * global chain links every event in log order; an operator's chain links only the events of that
 * operator's streams, in the same order, starting again from 32 zero bytes. docs/auditors.md says the
 * same for someone writing their own verifier; scripts/verify-history.mjs is one.
 */

export const GENESIS: Buffer = Buffer.alloc(32);

/** What the chain hashes of an event. */
export interface ChainedEvent {
  stream: string;
  type: string;
  data: unknown;
  metadata: unknown;
  position: string;
  recordedAt: string;
}

/**
 * An event's recorded time as the chain and the audit routes write it: ISO 8601 UTC with milliseconds, or ""
 * when the store holds no time a date can (a row edited by hand to Postgres's `infinity`, or past year
 * 275760). No append makes such a time, so the event's link breaks there and verify-chain (and an
 * operator's check) names it, instead of failing to read it.
 */
export const recordedAtText = (createdAt: Date): string => (Number.isNaN(createdAt.getTime()) ? '' : createdAt.toISOString());

export const chainedEvent = (e: RecordedEvent): ChainedEvent => ({
  stream: e.streamId,
  type: e.type,
  data: e.data,
  metadata: e.metadata,
  position: e.position,
  recordedAt: recordedAtText(e.createdAt),
});

export const canonicalEvent = (e: ChainedEvent): string => canonicalJson(e);

/** The bytes an event contributes to every chain it is in: compute once, link as often as needed. */
export const eventBytes = (event: ChainedEvent): Buffer => Buffer.from(canonicalEvent(event), 'utf8');

export function nextLink(previous: Buffer, event: ChainedEvent | Buffer): Buffer {
  return createHash('sha256')
    .update(previous)
    .update(Buffer.isBuffer(event) ? event : eventBytes(event))
    .digest();
}
