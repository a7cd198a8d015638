import { describe, expect, it } from 'vitest';
import { dispatchQueueName } from '../../services/rounds/queue.ts';

describe('per-operator dispatch queues (contract 8 rule 8)', () => {
  it('names one queue per operator, which BullMQ accepts whatever the operator id', () => {
    expect(dispatchQueueName('op-1')).toBe('wallet-dispatch.op-1');
    // BullMQ refuses ':' in a queue name; distinct ids keep distinct names.
    expect(dispatchQueueName('acme:eu')).not.toContain(':');
    expect(dispatchQueueName('acme:eu')).not.toBe(dispatchQueueName('acme%3Aeu'));
  });
});
