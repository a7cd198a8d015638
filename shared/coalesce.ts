/** One item's result in a batch: its value, or the error that item alone failed with. */
export type Settled<O> = { ok: true; value: O } | { ok: false; error: unknown };

export interface CoalescerOptions {
  /** Batches running at once. A call made while a slot is free is sent at once, alone. */
  maxInFlight: number;
  /** Items per batch at most. */
  maxBatch: number;
}

/**
 * Turns concurrent calls into batched round trips (group commit). While `maxInFlight` batches are
 * running, new calls queue; the next free slot takes the whole queue (up to maxBatch) in one call.
 * At low load every call goes alone and at once, so batching adds no wait; under load a batch holds
 * whatever arrived during the previous round trip, so round trips per item fall as load rises.
 *
 * `runBatch` answers every item separately (one item's conflict does not fail its neighbours). If it
 * throws, every item of that batch gets the error.
 */
export class Coalescer<I, O> {
  private queue: Array<{ input: I; resolve: (value: O) => void; reject: (error: unknown) => void }> = [];
  private inFlight = 0;

  constructor(
    private readonly runBatch: (inputs: I[]) => Promise<Array<Settled<O>>>,
    private readonly options: CoalescerOptions,
  ) {}

  submit(input: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ input, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < this.options.maxInFlight && this.queue.length > 0) {
      const batch = this.queue.splice(0, this.options.maxBatch);
      this.inFlight += 1;
      this.runBatch(batch.map((b) => b.input))
        .then(
          (results) =>
            batch.forEach((b, i) => {
              const r = results[i];
              if (!r) b.reject(new Error('batch returned no result for an item'));
              else if (r.ok) b.resolve(r.value);
              else b.reject(r.error);
            }),
          (err: unknown) => batch.forEach((b) => b.reject(err)),
        )
        .finally(() => {
          this.inFlight -= 1;
          this.pump();
        });
    }
  }
}
