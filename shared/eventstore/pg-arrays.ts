import type { NewEvent } from './port.ts';

/** Events as the parallel arrays (ids, types, data, metadata) the Postgres functions take. */
export function eventArrays(events: NewEvent[]): [string[], string[], string[], string[]] {
  return [
    events.map((e) => e.id),
    events.map((e) => e.type),
    events.map((e) => JSON.stringify(e.data)),
    events.map((e) => JSON.stringify(e.metadata ?? {})),
  ];
}
