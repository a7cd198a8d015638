/** Work that outlives the request that started it (best-effort notifications); awaited on shutdown. */
export class BackgroundTasks {
  private readonly running = new Set<Promise<unknown>>();

  track(task: Promise<unknown>): void {
    const p = task.catch(() => undefined).finally(() => this.running.delete(p));
    this.running.add(p);
  }

  async drain(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running]);
  }
}
